"""Call-log trace ids are unique, so a row replayed from the journal is never written twice.

Revision ID: 0004
Revises: 0003

"""
from typing import Sequence, Union

from alembic import op

revision: str = '0004'
down_revision: Union[str, Sequence[str], None] = '0003'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # Trace ids were always generated per call; remove any duplicate an older writer's retry left.
    op.execute("DELETE FROM call_log WHERE id NOT IN (SELECT MIN(id) FROM call_log GROUP BY trace_id)")
    op.drop_index('ix_call_log_trace_id', table_name='call_log')
    op.create_index('ix_call_log_trace_id', 'call_log', ['trace_id'], unique=True)


def downgrade() -> None:
    op.drop_index('ix_call_log_trace_id', table_name='call_log')
    op.create_index('ix_call_log_trace_id', 'call_log', ['trace_id'], unique=False)
