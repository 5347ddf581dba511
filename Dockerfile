FROM python:3.11-slim
WORKDIR /app
COPY . /app
# Editable install: the Alembic migrations are read from /app/migrations at start-up.
RUN pip install --no-cache-dir -e .
# Compile the scheduler simulation's event loop into numba's on-disk cache now, not at the first start-up.
RUN python -c "from service.core.scheduler import warm_up; warm_up()"
ENV DATABASE_URL=sqlite:////data/llm_deploy_advisor.db
VOLUME ["/data"]
EXPOSE 8000
CMD ["uvicorn", "service.main:app", "--host", "0.0.0.0", "--port", "8000", "--workers", "2"]
