"""The store: SQLAlchemy models, store/session setup and schema migrations (Alembic, docs/store.md), and the
row helpers every reader shares (storage.rows: as_dict, column_names, get_or_raise).

Who builds queries: storage/ defines the tables and sessions, writes dialogues (storage.dialogues), reads
dialogue collections (storage.queries) and keeps the people-in-the-loop tables (storage.ratings). The package
that owns a stored concept builds its own queries over these models: simulator/personas (personas, sets,
generations), simulator/evaluation (judge scores, ratings, transcripts, fidelity), trainer/jobs,
trainer/benchmarking, trainer/experiments, trainer/learning (its metrics), and app/services for what the pages
read. Nothing else imports sqlalchemy (no view, rollout loop, policy or simulated user), and nothing outside
storage/ reads a table's columns itself (tests/test_layout.py checks both)."""
from storage.db import (
                        Store,
                        code_version,
                        default_url,
                        lab_home,
                        make_store,
                        masked,
                        read_scope,
                        session_scope,
                        store_id,
)
from storage.migrate import StoreError, exit_code
from storage.models import (
                        Base,
                        Checkpoint,
                        Comparison,
                        ComparisonPair,
                        Dialogue,
                        EvalRun,
                        Experiment,
                        ExperimentCell,
                        Job,
                        JudgeScore,
                        Metric,
                        Persona,
                        PersonaCandidate,
                        PersonaGeneration,
                        Turn,
)
from storage.ratings import HumanRating, ShadowJudgement  # registers the people-in-the-loop tables with Base
from storage.rows import as_dict, column_names, get_or_raise

__all__ = ["Base", "Checkpoint", "Comparison", "ComparisonPair", "Dialogue", "EvalRun", "Experiment",
           "ExperimentCell", "HumanRating", "Job", "JudgeScore", "Metric", "Persona", "PersonaCandidate",
           "PersonaGeneration", "ShadowJudgement", "Store", "StoreError", "Turn", "as_dict", "code_version",
           "column_names", "default_url", "exit_code", "get_or_raise", "lab_home", "make_store", "masked",
           "read_scope", "session_scope", "store_id"]
