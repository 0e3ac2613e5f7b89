"""${message}

Revision ${up_revision}, after ${down_revision | comma,n}; made ${create_date}.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
${imports if imports else ""}
revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}
# A revision that needs the owner's decision (it drops or rewrites data, or takes long on a big store) sets
# OWNER_DECISION = "what it does"; opening the store then refuses and names `python -m storage upgrade`.
OWNER_DECISION = ""


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}
