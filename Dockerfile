FROM python:3.11-slim
WORKDIR /app
COPY . /app
# Editable install: the Alembic migrations are read from /app/migrations at start-up.
RUN pip install --no-cache-dir -c constraints.txt -e .
# Compile the numba kernels (serving solve, scheduler simulation, Pareto sweep) into their on-disk cache now,
# not at start-up.
RUN python -c "from service.core import costmodel, scheduler, search; costmodel.warm_up(); scheduler.warm_up(); search.warm_up()"
ENV DATABASE_URL=sqlite:////data/llm_deploy_advisor.db
# glibc gives each thread that contends for malloc an arena of its own (up to 8 per core) and keeps what is freed in
# it: a worker's refits, run in whichever request thread, leave their peak in one arena after another. Two arenas
# bound that (benchmarks/load.py --soak, benchmarks/memory_growth.py).
ENV MALLOC_ARENA_MAX=2
VOLUME ["/data"]
EXPOSE 8000
# SIGTERM: stop accepting, finish requests in flight for up to 30 s (an ingest commits whole or not at all).
CMD ["uvicorn", "service.main:app", "--host", "0.0.0.0", "--port", "8000", "--workers", "2", \
     "--timeout-graceful-shutdown", "30"]
