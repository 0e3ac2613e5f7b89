"""The store: SQLAlchemy models and engine/session setup. Queries are built here and in the service modules
that own a domain (docs/design.md, "Data flow"); no view imports sqlalchemy (tests/test_layout.py)."""
from storage.db import Store, code_version, default_url, lab_home, make_engine, read_scope, session_scope, store_id
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

__all__ = ["Base", "Checkpoint", "Comparison", "ComparisonPair", "Dialogue", "EvalRun", "Experiment",
           "ExperimentCell", "Job", "JudgeScore", "Metric", "Persona", "PersonaCandidate", "PersonaGeneration",
           "Store", "Turn", "code_version", "default_url", "lab_home", "make_engine", "read_scope", "session_scope",
           "store_id"]
