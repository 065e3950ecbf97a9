"""Replaying many chats against a lorebook, turn by turn, in process, on a local process
pool or on Ray; rows out as Parquet; a summary over them.

pyarrow (the ``replay`` extra: ``pip install ".[replay]"`` from a checkout) and Ray
(``".[ray]"``) are optional and imported only when used.
"""
from .chats import Chat, ChatItem, Problem, iter_items, parse_item
from .run import RunInfo, replay_batch
from .summary import summarize
from .turns import ReplayJob, Replayer, turn_points, turn_seed

__all__ = ["replay_batch", "RunInfo", "summarize", "Replayer", "ReplayJob", "turn_seed", "turn_points",
           "Chat", "ChatItem", "Problem", "iter_items", "parse_item"]
