"""baseline: the schema of the last version without migrations (main at d29f43a)

Revision 0001, the first. On a new store it creates every table. On a store made before migrations (its
tables made by create_all, no alembic_version) it adopts the store: it creates the tables the store lacks and
adds the nullable columns and indexes its tables lack (what versions before migrations added by hand, e.g.
turn.policy_version), keeping every row. The schema is frozen here: later changes are later revisions.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.migrate import StoreError

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None
OWNER_DECISION = ""

SCHEMA = sa.MetaData()
sa.Table('comparison', SCHEMA,
         sa.Column('id', sa.Integer, nullable=False),
         sa.Column('name', sa.String(length=200), nullable=False),
         sa.Column('config', sa.JSON, nullable=False),
         sa.Column('a_ref', sa.Text, nullable=False),
         sa.Column('b_ref', sa.Text, nullable=False),
         sa.Column('eval_runs', sa.JSON, nullable=False),
         sa.Column('summary', sa.JSON, nullable=False),
         sa.Column('status', sa.String(length=16), nullable=False),
         sa.Column('error', sa.Text, nullable=False),
         sa.Column('code_version', sa.String(length=64), nullable=False),
         sa.Column('created_at', sa.DateTime, nullable=False),
         sa.Column('finished_at', sa.DateTime, nullable=True),
         sa.PrimaryKeyConstraint('id'))
sa.Table('experiment', SCHEMA,
         sa.Column('id', sa.Integer, nullable=False),
         sa.Column('name', sa.String(length=200), nullable=False),
         sa.Column('base', sa.JSON, nullable=False),
         sa.Column('grid', sa.JSON, nullable=False),
         sa.Column('benchmark', sa.JSON, nullable=False),
         sa.Column('judge', sa.JSON, nullable=False),
         sa.Column('parallel', sa.Integer, nullable=False),
         sa.Column('source', sa.Text, nullable=False),
         sa.Column('status', sa.String(length=16), nullable=False),
         sa.Column('runner_pid', sa.Integer, nullable=True),
         sa.Column('error', sa.Text, nullable=False),
         sa.Column('code_version', sa.String(length=64), nullable=False),
         sa.Column('created_at', sa.DateTime, nullable=False),
         sa.Column('finished_at', sa.DateTime, nullable=True),
         sa.PrimaryKeyConstraint('id'),
         sa.Index('ix_experiment_status', 'status'))
sa.Table('job', SCHEMA,
         sa.Column('id', sa.Integer, nullable=False),
         sa.Column('kind', sa.String(length=16), nullable=False),
         sa.Column('name', sa.String(length=200), nullable=False),
         sa.Column('config', sa.JSON, nullable=False),
         sa.Column('status', sa.String(length=16), nullable=False),
         sa.Column('pid', sa.Integer, nullable=True),
         sa.Column('heartbeat_at', sa.DateTime, nullable=True),
         sa.Column('progress', sa.Float, nullable=False),
         sa.Column('step', sa.Integer, nullable=False),
         sa.Column('total_steps', sa.Integer, nullable=False),
         sa.Column('log_path', sa.Text, nullable=False),
         sa.Column('output_dir', sa.Text, nullable=False),
         sa.Column('error', sa.Text, nullable=False),
         sa.Column('seed', sa.Integer, nullable=False),
         sa.Column('code_version', sa.String(length=64), nullable=False),
         sa.Column('parent_id', sa.Integer, nullable=True),
         sa.Column('created_at', sa.DateTime, nullable=False),
         sa.Column('started_at', sa.DateTime, nullable=True),
         sa.Column('finished_at', sa.DateTime, nullable=True),
         sa.ForeignKeyConstraint(['parent_id'], ['job.id']),
         sa.PrimaryKeyConstraint('id'),
         sa.Index('ix_job_status', 'status'))
sa.Table('persona', SCHEMA,
         sa.Column('id', sa.String(length=64), nullable=False),
         sa.Column('name', sa.String(length=200), nullable=False),
         sa.Column('language', sa.String(length=8), nullable=False),
         sa.Column('persona', sa.Text, nullable=False),
         sa.Column('background', sa.Text, nullable=False),
         sa.Column('explicit_goal', sa.Text, nullable=False),
         sa.Column('hidden_need', sa.Text, nullable=False),
         sa.Column('need_category', sa.String(length=32), nullable=False),
         sa.Column('personality', sa.String(length=16), nullable=False),
         sa.Column('traits', sa.JSON, nullable=False),
         sa.Column('first_line', sa.Text, nullable=False),
         sa.Column('difficulty', sa.String(length=16), nullable=False),
         sa.Column('source', sa.String(length=32), nullable=False),
         sa.Column('extra', sa.JSON, nullable=False),
         sa.Column('created_at', sa.DateTime, nullable=False),
         sa.Column('updated_at', sa.DateTime, nullable=False),
         sa.PrimaryKeyConstraint('id'))
sa.Table('persona_generation', SCHEMA,
         sa.Column('id', sa.Integer, nullable=False),
         sa.Column('endpoint', sa.String(length=200), nullable=False),
         sa.Column('model', sa.String(length=200), nullable=False),
         sa.Column('prompt_version', sa.String(length=32), nullable=False),
         sa.Column('prompt_sha256', sa.String(length=64), nullable=False),
         sa.Column('spec', sa.JSON, nullable=False),
         sa.Column('settings', sa.JSON, nullable=False),
         sa.Column('status', sa.String(length=16), nullable=False),
         sa.Column('n_planned', sa.Integer, nullable=False),
         sa.Column('n_done', sa.Integer, nullable=False),
         sa.Column('error', sa.Text, nullable=False),
         sa.Column('seed', sa.Integer, nullable=False),
         sa.Column('code_version', sa.String(length=64), nullable=False),
         sa.Column('created_at', sa.DateTime, nullable=False),
         sa.Column('finished_at', sa.DateTime, nullable=True),
         sa.PrimaryKeyConstraint('id'))
sa.Table('persona_set', SCHEMA,
         sa.Column('id', sa.Integer, nullable=False),
         sa.Column('name', sa.String(length=200), nullable=False),
         sa.Column('content_hash', sa.String(length=64), nullable=False),
         sa.Column('source_kind', sa.String(length=16), nullable=False),
         sa.Column('params', sa.JSON, nullable=False),
         sa.Column('code_version', sa.String(length=64), nullable=False),
         sa.Column('created_at', sa.DateTime, nullable=False),
         sa.PrimaryKeyConstraint('id'),
         sa.UniqueConstraint('name'))
sa.Table('store_meta', SCHEMA,
         sa.Column('key', sa.String(length=64), nullable=False),
         sa.Column('value', sa.Text, nullable=False),
         sa.PrimaryKeyConstraint('key'))
sa.Table('checkpoint', SCHEMA,
         sa.Column('id', sa.Integer, nullable=False),
         sa.Column('job_id', sa.Integer, nullable=False),
         sa.Column('step', sa.Integer, nullable=False),
         sa.Column('path', sa.Text, nullable=False),
         sa.Column('metrics', sa.JSON, nullable=False),
         sa.Column('created_at', sa.DateTime, nullable=False),
         sa.ForeignKeyConstraint(['job_id'], ['job.id'], ondelete='CASCADE'),
         sa.PrimaryKeyConstraint('id'),
         sa.Index('ix_checkpoint_job_id', 'job_id'))
sa.Table('eval_run', SCHEMA,
         sa.Column('id', sa.Integer, nullable=False),
         sa.Column('job_id', sa.Integer, nullable=True),
         sa.Column('name', sa.String(length=200), nullable=False),
         sa.Column('model_ref', sa.Text, nullable=False),
         sa.Column('simulator_fingerprint', sa.JSON, nullable=False),
         sa.Column('fingerprint_hash', sa.String(length=64), nullable=False),
         sa.Column('profile_set_hash', sa.String(length=64), nullable=False),
         sa.Column('protocol', sa.JSON, nullable=False),
         sa.Column('config', sa.JSON, nullable=False),
         sa.Column('status', sa.String(length=16), nullable=False),
         sa.Column('score', sa.Float, nullable=True),
         sa.Column('success', sa.Integer, nullable=True),
         sa.Column('failure', sa.Integer, nullable=True),
         sa.Column('n', sa.Integer, nullable=False),
         sa.Column('n_errors', sa.Integer, nullable=False),
         sa.Column('ci_low', sa.Float, nullable=True),
         sa.Column('ci_high', sa.Float, nullable=True),
         sa.Column('seed', sa.Integer, nullable=False),
         sa.Column('code_version', sa.String(length=64), nullable=False),
         sa.Column('created_at', sa.DateTime, nullable=False),
         sa.Column('finished_at', sa.DateTime, nullable=True),
         sa.ForeignKeyConstraint(['job_id'], ['job.id']),
         sa.PrimaryKeyConstraint('id'),
         sa.Index('ix_eval_run_fingerprint_hash', 'fingerprint_hash'))
sa.Table('metric', SCHEMA,
         sa.Column('id', sa.Integer, nullable=False),
         sa.Column('job_id', sa.Integer, nullable=False),
         sa.Column('step', sa.Integer, nullable=False),
         sa.Column('name', sa.String(length=64), nullable=False),
         sa.Column('value', sa.Float, nullable=False),
         sa.Column('created_at', sa.DateTime, nullable=False),
         sa.ForeignKeyConstraint(['job_id'], ['job.id'], ondelete='CASCADE'),
         sa.PrimaryKeyConstraint('id'),
         sa.UniqueConstraint('job_id', 'step', 'name'),
         sa.Index('ix_metric_job_name', 'job_id', 'name'))
sa.Table('persona_candidate', SCHEMA,
         sa.Column('id', sa.Integer, nullable=False),
         sa.Column('generation_id', sa.Integer, nullable=False),
         sa.Column('slot', sa.Integer, nullable=False),
         sa.Column('plan', sa.JSON, nullable=False),
         sa.Column('profile', sa.JSON, nullable=False),
         sa.Column('status', sa.String(length=16), nullable=False),
         sa.Column('validation_error', sa.Text, nullable=False),
         sa.Column('lint_warnings', sa.Integer, nullable=False),
         sa.Column('lint', sa.JSON, nullable=False),
         sa.Column('similarity', sa.Float, nullable=True),
         sa.Column('nearest_id', sa.String(length=64), nullable=False),
         sa.Column('persona_id', sa.String(length=64), nullable=False),
         sa.Column('raw', sa.Text, nullable=False),
         sa.Column('attempts', sa.Integer, nullable=False),
         sa.Column('regenerated', sa.Integer, nullable=False),
         sa.Column('latency_s', sa.Float, nullable=False),
         sa.Column('n_tokens', sa.Integer, nullable=False),
         sa.Column('created_at', sa.DateTime, nullable=False),
         sa.Column('updated_at', sa.DateTime, nullable=False),
         sa.ForeignKeyConstraint(['generation_id'], ['persona_generation.id'], ondelete='CASCADE'),
         sa.PrimaryKeyConstraint('id'),
         sa.UniqueConstraint('generation_id', 'slot'),
         sa.Index('ix_persona_candidate_generation_id', 'generation_id'),
         sa.Index('ix_persona_candidate_status', 'status'))
sa.Table('persona_set_member', SCHEMA,
         sa.Column('id', sa.Integer, nullable=False),
         sa.Column('set_id', sa.Integer, nullable=False),
         sa.Column('position', sa.Integer, nullable=False),
         sa.Column('persona_id', sa.String(length=64), nullable=False),
         sa.ForeignKeyConstraint(['set_id'], ['persona_set.id'], ondelete='CASCADE'),
         sa.PrimaryKeyConstraint('id'),
         sa.UniqueConstraint('set_id', 'persona_id'),
         sa.UniqueConstraint('set_id', 'position'),
         sa.Index('ix_persona_set_member_set_id', 'set_id'))
sa.Table('dialogue', SCHEMA,
         sa.Column('id', sa.Integer, nullable=False),
         sa.Column('persona_id', sa.String(length=64), nullable=True),
         sa.Column('persona_snapshot', sa.JSON, nullable=False),
         sa.Column('source', sa.String(length=16), nullable=False),
         sa.Column('collection', sa.String(length=200), nullable=False),
         sa.Column('external_id', sa.String(length=128), nullable=False),
         sa.Column('policy_ref', sa.Text, nullable=False),
         sa.Column('mode', sa.String(length=8), nullable=False),
         sa.Column('simulator_fingerprint', sa.JSON, nullable=False),
         sa.Column('fingerprint_hash', sa.String(length=64), nullable=False),
         sa.Column('job_id', sa.Integer, nullable=True),
         sa.Column('step', sa.Integer, nullable=True),
         sa.Column('group_id', sa.String(length=64), nullable=False),
         sa.Column('eval_run_id', sa.Integer, nullable=True),
         sa.Column('status', sa.String(length=16), nullable=False),
         sa.Column('final_emotion', sa.Float, nullable=True),
         sa.Column('outcome', sa.String(length=16), nullable=False),
         sa.Column('error', sa.Text, nullable=False),
         sa.Column('n_turns', sa.Integer, nullable=False),
         sa.Column('seed', sa.Integer, nullable=False),
         sa.Column('config', sa.JSON, nullable=False),
         sa.Column('code_version', sa.String(length=64), nullable=False),
         sa.Column('created_at', sa.DateTime, nullable=False),
         sa.Column('finished_at', sa.DateTime, nullable=True),
         sa.ForeignKeyConstraint(['eval_run_id'], ['eval_run.id']),
         sa.ForeignKeyConstraint(['job_id'], ['job.id']),
         sa.PrimaryKeyConstraint('id'),
         sa.Index('ix_dialogue_collection', 'collection'),
         sa.Index('ix_dialogue_eval_run_id', 'eval_run_id'),
         sa.Index('ix_dialogue_fingerprint_hash', 'fingerprint_hash'),
         sa.Index('ix_dialogue_job_id', 'job_id'),
         sa.Index('ix_dialogue_persona_id', 'persona_id'))
sa.Table('experiment_cell', SCHEMA,
         sa.Column('id', sa.Integer, nullable=False),
         sa.Column('experiment_id', sa.Integer, nullable=False),
         sa.Column('index', sa.Integer, nullable=False),
         sa.Column('params', sa.JSON, nullable=False),
         sa.Column('config', sa.JSON, nullable=False),
         sa.Column('status', sa.String(length=16), nullable=False),
         sa.Column('train_job_id', sa.Integer, nullable=True),
         sa.Column('benchmark_job_id', sa.Integer, nullable=True),
         sa.Column('eval_run_id', sa.Integer, nullable=True),
         sa.Column('error', sa.Text, nullable=False),
         sa.ForeignKeyConstraint(['benchmark_job_id'], ['job.id']),
         sa.ForeignKeyConstraint(['eval_run_id'], ['eval_run.id']),
         sa.ForeignKeyConstraint(['experiment_id'], ['experiment.id'], ondelete='CASCADE'),
         sa.ForeignKeyConstraint(['train_job_id'], ['job.id']),
         sa.PrimaryKeyConstraint('id'),
         sa.UniqueConstraint('experiment_id', 'index'),
         sa.Index('ix_experiment_cell_benchmark_job_id', 'benchmark_job_id'),
         sa.Index('ix_experiment_cell_experiment_id', 'experiment_id'),
         sa.Index('ix_experiment_cell_train_job_id', 'train_job_id'))
sa.Table('comparison_pair', SCHEMA,
         sa.Column('id', sa.Integer, nullable=False),
         sa.Column('comparison_id', sa.Integer, nullable=False),
         sa.Column('persona_id', sa.String(length=200), nullable=False),
         sa.Column('seed', sa.Integer, nullable=False),
         sa.Column('a_dialogue_id', sa.Integer, nullable=False),
         sa.Column('b_dialogue_id', sa.Integer, nullable=False),
         sa.ForeignKeyConstraint(['a_dialogue_id'], ['dialogue.id']),
         sa.ForeignKeyConstraint(['b_dialogue_id'], ['dialogue.id']),
         sa.ForeignKeyConstraint(['comparison_id'], ['comparison.id'], ondelete='CASCADE'),
         sa.PrimaryKeyConstraint('id'),
         sa.UniqueConstraint('comparison_id', 'persona_id', 'seed'),
         sa.Index('ix_comparison_pair_comparison_id', 'comparison_id'))
sa.Table('judge_score', SCHEMA,
         sa.Column('id', sa.Integer, nullable=False),
         sa.Column('dialogue_id', sa.Integer, nullable=False),
         sa.Column('eval_run_id', sa.Integer, nullable=True),
         sa.Column('judge_fingerprint', sa.JSON, nullable=False),
         sa.Column('judge_hash', sa.String(length=64), nullable=False),
         sa.Column('status', sa.String(length=16), nullable=False),
         sa.Column('error_kind', sa.String(length=16), nullable=False),
         sa.Column('error', sa.Text, nullable=False),
         sa.Column('scores', sa.JSON, nullable=False),
         sa.Column('reasons', sa.JSON, nullable=False),
         sa.Column('mean', sa.Float, nullable=True),
         sa.Column('raw', sa.Text, nullable=False),
         sa.Column('attempts', sa.Integer, nullable=False),
         sa.Column('latency_s', sa.Float, nullable=False),
         sa.Column('n_tokens', sa.Integer, nullable=False),
         sa.Column('code_version', sa.String(length=64), nullable=False),
         sa.Column('created_at', sa.DateTime, nullable=False),
         sa.ForeignKeyConstraint(['dialogue_id'], ['dialogue.id'], ondelete='CASCADE'),
         sa.ForeignKeyConstraint(['eval_run_id'], ['eval_run.id']),
         sa.PrimaryKeyConstraint('id'),
         sa.UniqueConstraint('dialogue_id', 'judge_hash'),
         sa.Index('ix_judge_score_dialogue_id', 'dialogue_id'),
         sa.Index('ix_judge_score_eval_run_id', 'eval_run_id'),
         sa.Index('ix_judge_score_judge_hash', 'judge_hash'))
sa.Table('turn', SCHEMA,
         sa.Column('id', sa.Integer, nullable=False),
         sa.Column('dialogue_id', sa.Integer, nullable=False),
         sa.Column('index', sa.Integer, nullable=False),
         sa.Column('role', sa.String(length=16), nullable=False),
         sa.Column('text', sa.Text, nullable=False),
         sa.Column('think_text', sa.Text, nullable=False),
         sa.Column('emotion', sa.Float, nullable=True),
         sa.Column('delta', sa.Float, nullable=True),
         sa.Column('inner', sa.JSON, nullable=False),
         sa.Column('n_tokens', sa.Integer, nullable=False),
         sa.Column('latency_s', sa.Float, nullable=False),
         sa.Column('error', sa.Text, nullable=False),
         sa.Column('policy_version', sa.Integer, nullable=True),
         sa.Column('created_at', sa.DateTime, nullable=False),
         sa.ForeignKeyConstraint(['dialogue_id'], ['dialogue.id'], ondelete='CASCADE'),
         sa.PrimaryKeyConstraint('id'),
         sa.UniqueConstraint('dialogue_id', 'index'),
         sa.Index('ix_turn_dialogue_id', 'dialogue_id'))


def upgrade() -> None:
    bind = op.get_bind()
    have = set(sa.inspect(bind).get_table_names())
    notes = op.get_context().config.attributes.get("notes", []) if op.get_context().config else []
    for table in SCHEMA.sorted_tables:
        if table.name not in have:
            table.create(bind)
            if "job" in have:
                notes.append(f"created table {table.name}")
            continue
        inspector = sa.inspect(bind)
        present = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in present:
                continue
            if not column.nullable:
                raise StoreError(f"the store's table {table.name} lacks the column {column.name}, which cannot "
                                 "be added to old rows (no default): this store was made by a version too old "
                                 "to adopt")
            op.add_column(table.name, sa.Column(column.name, column.type, nullable=True))
            notes.append(f"added column {table.name}.{column.name}")
        indexes = {i["name"] for i in inspector.get_indexes(table.name)}
        for index in table.indexes:
            if index.name not in indexes:
                index.create(bind)
                notes.append(f"added index {index.name}")


def downgrade() -> None:
    for table in reversed(SCHEMA.sorted_tables):
        op.drop_table(table.name)
