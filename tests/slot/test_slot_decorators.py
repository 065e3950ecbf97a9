"""SPEC 15.8: the decorator header of lorebook-slot mode (CCv3 / RisuAI parsing rules)."""
from __future__ import annotations

import pytest

from lorescan.slot import parse_decorators


def statuses(content: str, **kw) -> list[tuple[str, str]]:
    d, _ = parse_decorators(content, **kw)
    return [(line.name, line.status.split(":")[0]) for line in d.lines]


def test_the_seed_example_header_is_read_and_stripped():
    d, body = parse_decorators("@@probability 50\n@@role assistant\n@@keep\nThe lighthouse keeper waves.")
    assert (d.probability, d.role, d.keep) == (50, "assistant", True)
    assert body == "The lighthouse keeper waves."


def test_content_without_a_header_is_only_trimmed():
    d, body = parse_decorators("  \n plain text \n")
    assert body == "plain text" and d.lines == ()


def test_lines_are_trimmed_before_reading_and_the_body_is_trimmed_as_a_whole():
    d, body = parse_decorators("  @@role user  \r\n  @@keep\t\r\n\n  first line \n  second  ")
    assert (d.role, d.keep) == ("user", True)
    assert body == "first line \n  second"


def test_a_content_made_only_of_decorators_becomes_empty():
    d, body = parse_decorators("@@activate\n@@role user")
    assert body == "" and d.activate and d.role == "user"


def test_the_first_non_decorator_line_ends_the_header():
    d, body = parse_decorators("@@keep\nbody\n@@role user")
    assert d.role is None and body == "body\n@@role user"


def test_arguments_are_split_on_commas_trimmed_and_empty_ones_dropped():
    d, _ = parse_decorators("@@additional_keys  red , ,blue,  \nx")
    assert d.additional_keys == (("red", "blue"),)


def test_a_fallback_is_tried_after_an_unknown_decorator():
    d, body = parse_decorators("@@xyz\n@@@activate\nfb")
    assert d.activate and body == "fb"
    assert statuses("@@xyz\n@@@activate\nfb") == [("xyz", "rejected"), ("activate", "accepted")]


def test_a_fallback_with_nothing_to_fall_back_from_is_skipped():
    d, body = parse_decorators("@@@activate\nno")
    assert not d.activate and body == "no"
    d, _ = parse_decorators("@@keep\n@@@activate\nno")
    assert d.keep and not d.activate


def test_fallback_chains_of_any_length_stop_at_the_first_accepted_line():
    content = "@@depth 3\n@@@role narrator\n@@@role user\n@@@role assistant\nx"
    d, _ = parse_decorators(content)
    assert d.role == "user"
    assert statuses(content) == [("depth", "rejected"), ("role", "rejected"), ("role", "accepted"),
                                 ("role", "skipped")]


@pytest.mark.parametrize("name", ["depth 2", "reverse_depth 1", "instruct_depth 1", "reverse_instruct_depth 1",
                                  "position after_desc", "end", "instruct_scan_depth 4"])
def test_placement_decorators_are_rejected_so_their_fallback_applies(name):
    d, _ = parse_decorators(f"@@{name}\n@@@role user\nx")
    assert d.role == "user"


def test_triple_at_end_is_read_as_end():
    assert statuses("@@@end\nx") == [("end", "rejected")]      # a plain decorator, not a fallback
    assert statuses("@@xyz\n@@@end\n@@@keep\nx") == [("xyz", "rejected"), ("end", "rejected"), ("keep", "accepted")]


def test_a_repeated_decorator_keeps_its_first_value():
    d, _ = parse_decorators("@@role user\n@@role assistant\n@@probability 10\n@@probability 90\nx")
    assert (d.role, d.probability) == ("user", 10)
    assert statuses("@@role user\n@@role assistant\nx")[1] == ("role", "ignored")


def test_opposite_flags_keep_the_first_one():
    assert parse_decorators("@@unrecursive\n@@recursive\nx")[0].recursive is False
    assert parse_decorators("@@match_full_word\n@@match_partial_word\nx")[0].whole_words is True


def test_key_list_decorators_accumulate():
    d, _ = parse_decorators("@@additional_keys a, b\n@@additional_keys c\n@@exclude_keys d\n"
                            "@@exclude_keys e\n@@exclude_keys_all f, g\n@@exclude_keys_all h\nx")
    assert d.additional_keys == (("a", "b"), ("c",))
    assert d.exclude_keys == ("d", "e")
    assert d.exclude_keys_all == (("f", "g"), ("h",))


@pytest.mark.parametrize("line, field, value", [
    ("@@probability 150", "probability", 100), ("@@probability -5", "probability", 0),
    ("@@probability 12.5", "probability", 12.5), ("@@scan_depth 500", "scan_depth", 100),
    ("@@scan_depth -1", "scan_depth", 0), ("@@scan_depth 2.9", "scan_depth", 2),
    ("@@order -3", "order", -3), ("@@priority 1e3", "priority", 1000),
    ("@@activate_only_after 4", "activate_only_after", 4), ("@@activate_only_every 3", "activate_only_every", 3),
    ("@@role Assistant", "role", "assistant"), ("@@is_greeting 2", "greeting_index", 2),
    ("@@disable_ui_prompt post_history_instructions", "disable_ui_prompt", "post_history_instructions"),
])
def test_valid_values_are_read_and_clamped(line, field, value):
    d, _ = parse_decorators(line + "\nx")
    assert getattr(d, field) == value


@pytest.mark.parametrize("line", [
    "@@probability", "@@probability fifty", "@@probability 0x10", "@@probability NaN", "@@probability 1, 2",
    "@@scan_depth deep", "@@activate_only_every 0", "@@activate_only_every -2", "@@role narrator",
    "@@is_greeting first", "@@additional_keys", "@@disable_ui_prompt everything", "@@is_user_icon cat",
    "@@Keep", "@@",
])
def test_invalid_values_and_unsupported_decorators_are_rejected(line):
    d, _ = parse_decorators(line + "\n@@@keep\nx")
    assert d.keep, "a rejected line must let its fallback through"
    assert d.lines[0].status.startswith("rejected")


def test_is_user_icon_is_accepted_only_when_the_caller_supplies_an_icon():
    assert parse_decorators("@@is_user_icon cat\nx", user_icon=True)[0].is_user_icon == "cat"
    assert parse_decorators("@@is_user_icon cat\nx")[0].is_user_icon is None


def test_flags_ignore_arguments():
    d, _ = parse_decorators("@@keep please\n@@activate now\nx")
    assert d.keep and d.activate


def test_names_lists_accepted_decorators_in_order():
    d, _ = parse_decorators("@@xyz\n@@@keep\n@@role user\n@@role system\nx")
    assert d.names() == ("keep", "role")
