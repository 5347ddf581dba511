"""models.parallel_attention: attention and MLP in parallel, one all-reduce per layer under TP

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-04 16:45:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.add_column(sa.Column("parallel_attention", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.drop_column("parallel_attention")
