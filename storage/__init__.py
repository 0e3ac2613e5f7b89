"""The store: SQLAlchemy models, store/session setup and schema migrations (Alembic, docs/store.md). Queries
are built here and in the service modules that own a domain (docs/design.md, "Data flow"); no view imports
sqlalchemy (tests/test_layout.py)."""
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

__all__ = ["Base", "Checkpoint", "Comparison", "ComparisonPair", "Dialogue", "EvalRun", "Experiment",
           "ExperimentCell", "HumanRating", "Job", "JudgeScore", "Metric", "Persona", "PersonaCandidate",
           "PersonaGeneration", "ShadowJudgement", "Store", "StoreError", "Turn", "code_version", "default_url",
           "exit_code", "lab_home", "make_store", "masked", "read_scope", "session_scope", "store_id"]
