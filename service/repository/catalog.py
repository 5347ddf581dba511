"""Catalog persistence: load the data files into the database (idempotently) and read them back."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from gpu_catalog.loader import Catalog
from gpu_catalog.schema import (
    EngineSpec,
    GpuSpec,
    KvDtypeSpec,
    ModelSpec,
    SupportRow,
    WeightDtypeSpec,
)
from service.db.models import (
    CatalogState,
    Dtype,
    DtypeSupport,
    Engine,
    Gpu,
    Measurement,
    ModelAlias,
    ModelArch,
)

_MODEL_FIELDS = [f for f in ModelSpec.model_fields if f != "aliases"]
_GPU_FIELDS = list(GpuSpec.model_fields)


def stored_hash(session: Session, name: str) -> str | None:
    return session.scalar(select(CatalogState.content_sha256).where(CatalogState.name == name))


def record_hash(session: Session, name: str, sha: str) -> None:
    state = session.scalar(select(CatalogState).where(CatalogState.name == name))
    if state is None:
        session.add(CatalogState(name=name, content_sha256=sha))
    else:
        state.content_sha256 = sha


def sync_catalog(session: Session, catalog: Catalog) -> bool:
    """Make the catalog tables equal to the files. Returns False when nothing had changed."""
    if stored_hash(session, "catalog") == catalog.content_sha256:
        return False
    for g in catalog.gpus:
        data = g.model_dump()
        data["sources"] = g.sources.model_dump()
        session.merge(Gpu(**data))
    keep_models = {m.id for m in catalog.models}
    for m in catalog.models:
        row = session.get(ModelArch, m.id) or ModelArch(id=m.id)
        for f in _MODEL_FIELDS:
            setattr(row, f, getattr(m, f))
        wanted = {a.lower(): a for a in (m.id, *m.aliases)}
        row.aliases = [a for a in row.aliases if a.alias_lower in wanted]
        have = {a.alias_lower for a in row.aliases}
        row.aliases.extend(ModelAlias(alias_lower=k, alias=v) for k, v in wanted.items() if k not in have)
        session.add(row)
    session.flush()
    stale = [mid for mid in session.scalars(select(ModelArch.id)) if mid not in keep_models]
    if stale:
        session.execute(update(Measurement).where(Measurement.model_id.in_(stale)).values(model_id=None))
        session.execute(delete(ModelArch).where(ModelArch.id.in_(stale)))
    session.execute(delete(Gpu).where(Gpu.id.not_in([g.id for g in catalog.gpus])))
    session.execute(delete(DtypeSupport))
    session.execute(delete(Dtype))
    session.flush()
    for d in catalog.weight_dtypes:
        session.add(Dtype(kind="weight", id=d.id, name=d.name, bits=d.bits_per_weight,
                          native_compute=d.native_compute, fallback_compute=d.fallback_compute,
                          activation_bits=d.activation_bits, quality=d.quality,
                          quality_note=d.quality_note, source=d.source))
    for k in catalog.kv_dtypes:
        session.add(Dtype(kind="kv", id=k.id, name=k.name, bits=k.bits_per_element, quality=k.quality,
                          source=k.source))
    for e in catalog.engines:
        session.merge(Engine(**e.model_dump()))
    session.flush()
    for s in catalog.support:
        session.add(DtypeSupport(**s.model_dump()))
    record_hash(session, "catalog", catalog.content_sha256)
    session.flush()
    return True


def read_catalog(session: Session) -> Catalog:
    """The catalog as stored (the database is the source of truth once loaded)."""
    gpus = [GpuSpec.model_validate({f: getattr(g, f) for f in _GPU_FIELDS})
            for g in session.scalars(select(Gpu).order_by(Gpu.id))]
    models = [
        ModelSpec.model_validate(
            {**{f: getattr(m, f) for f in _MODEL_FIELDS},
             "aliases": [a.alias for a in m.aliases if a.alias_lower != m.id.lower()]})
        for m in session.scalars(select(ModelArch).order_by(ModelArch.id))
    ]
    dtypes: Sequence[Dtype] = session.scalars(select(Dtype).order_by(Dtype.kind, Dtype.id)).all()
    weight = [WeightDtypeSpec(id=d.id, name=d.name, bits_per_weight=d.bits,
                              native_compute=d.native_compute,
                              fallback_compute=d.fallback_compute,
                              activation_bits=d.activation_bits or 16, quality=d.quality,
                              quality_note=d.quality_note, source=d.source)
              for d in dtypes if d.kind == "weight"]
    kv = [KvDtypeSpec(id=d.id, name=d.name, bits_per_element=int(d.bits), quality=d.quality,
                      source=d.source) for d in dtypes if d.kind == "kv"]
    engines = [EngineSpec.model_validate({f: getattr(e, f) for f in EngineSpec.model_fields})
               for e in session.scalars(select(Engine).order_by(Engine.id))]
    support = [SupportRow.model_validate({f: getattr(s, f) for f in SupportRow.model_fields})
               for s in session.scalars(select(DtypeSupport))]
    return Catalog(gpus=gpus, models=models, weight_dtypes=weight, kv_dtypes=kv, engines=engines,
                   support=support, content_sha256=stored_hash(session, "catalog") or "")
