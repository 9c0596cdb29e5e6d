"""Trace readers: the real public traces, hand-written fixtures for every format, and fuzzing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from surgelab.traces import FORMATS, RowProblem, Trace, TraceError, read_trace

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "traces"


def real(name: str) -> Path:
    path = TRACES / name
    if not path.is_file():
        pytest.skip(f"real trace {name} not found in {TRACES} (the shared data folder is absent)")
    return path


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8", newline="")
    else:
        path.write_bytes(text)
    return path


# --- the real traces ----------------------------------------------------------------------

REAL = [
    # file, format, rows, mean rate (README) or None without timestamps
    ("AzureLLMInferenceTrace_code.csv", "azure", 8_819, 2.57),
    ("AzureLLMInferenceTrace_conv.csv", "azure", 19_366, 5.53),
    ("mooncake_conversation_trace.jsonl", "mooncake", 12_031, None),
    ("mooncake_synthetic_trace.jsonl", "mooncake", 3_993, None),
    ("sarathi_sharegpt_8k_filtered_stats_llama2_tokenizer.csv", "lengths", 30_731, None),
    ("vidur_arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv", "lengths", 28_257, None),
]


@pytest.mark.parametrize(("name", "fmt", "rows", "rate"), REAL, ids=[r[0].split("_")[0] + "-" + r[1] for r in REAL])
def test_real_traces_read_completely(name, fmt, rows, rate):
    trace = read_trace(real(name))
    assert trace.format == fmt
    assert len(trace) == rows
    assert trace.skipped == []
    assert trace.offsets_s.dtype == np.float64 and trace.prompt_tokens.dtype == np.int64
    assert trace.output_tokens.dtype == np.int64 and trace.failed.dtype == bool
    assert trace.offsets_s[0] == 0.0 and np.all(np.diff(trace.offsets_s) >= 0)
    assert np.all(trace.prompt_tokens >= 0) and np.all(trace.output_tokens >= 0)
    assert not trace.failed.any()
    if fmt == "lengths":
        assert not trace.has_timestamps and trace.duration_s == 0.0 and math.isnan(trace.mean_rate)
    else:
        assert trace.has_timestamps and 1000 < trace.duration_s < 3600
    if rate is not None:
        assert trace.mean_rate == pytest.approx(rate, abs=0.005)
        assert len(trace) / trace.duration_s == pytest.approx(rate, abs=0.005)
    # The explicit preset reads the same as auto-detection.
    again = read_trace(real(name), format=fmt)
    assert np.array_equal(again.offsets_s, trace.offsets_s)


def test_real_azure_keeps_sub_millisecond_timestamps():
    trace = read_trace(real("AzureLLMInferenceTrace_conv.csv"))
    # 2023-11-16 18:15:46.6805900 then 18:15:50.9951690 (microseconds kept, the 7th digit dropped)
    assert trace.offsets_s[1] == pytest.approx(4.314579, abs=1e-9)
    assert trace.prompt_tokens[:3].tolist() == [374, 396, 879]
    assert trace.output_tokens[:3].tolist() == [44, 109, 55]
    assert trace.duration_s == pytest.approx(3501.721937, abs=1e-6)


def test_real_mooncake_blocks_match_lengths_and_share_prefixes():
    trace = read_trace(real("mooncake_conversation_trace.jsonl"))
    assert trace.prefix_blocks is not None and len(trace.prefix_blocks) == len(trace)
    for blocks, n in zip(trace.prefix_blocks[:2000], trace.prompt_tokens[:2000].tolist()):
        assert len(blocks) == -(-n // 512)
    firsts = [b[0] for b in trace.prefix_blocks if b]
    assert len(set(firsts)) < len(firsts)  # shared first blocks exist
    assert trace.offsets_s[-1] == pytest.approx(3536.999)


# --- hand-written fixtures, one per format ------------------------------------------------

AZURE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:15:46.6805900,374,44\n"  # 2
    "2023-11-16 18:15:47.1805900,10,5\n"  # 3
    "2023-11-16 18:15:46.9305900,abc,5\n"  # 4 bad: not a number
    "2023-11-16 18:15:45.6805900,20,-1\n"  # 5 bad: negative
    "2023-11-16 25:15:46.0000000,20,1\n"  # 6 bad: hour 25
    "2023-11-16 18:15:47.1805900,11,6\n"  # 7 same time as line 3: stays after it
    "2023-11-16 18:15:48.0,12\n"  # 8 bad: a field short
    "\n"  # 9 blank: ignored
    "2023-11-16 18:15:46.4305900,30,7"  # 10 earlier than line 2; no trailing newline
)


def test_azure_fixture_sorts_stably_and_reports_bad_lines(tmp_path):
    trace = read_trace(write(tmp_path, "azure.csv", AZURE))
    assert trace.format == "azure" and trace.has_timestamps
    assert trace.lines.tolist() == [10, 2, 3, 7]
    assert trace.offsets_s.tolist() == pytest.approx([0.0, 0.25, 0.75, 0.75], abs=1e-9)
    assert trace.prompt_tokens.tolist() == [30, 374, 10, 11]
    assert trace.output_tokens.tolist() == [7, 44, 5, 6]
    assert [p.line for p in trace.skipped] == [4, 5, 6, 8]
    assert all(isinstance(p, RowProblem) for p in trace.skipped)
    assert "ContextTokens" in trace.skipped[0].message and "'abc'" in trace.skipped[0].message
    assert "non-negative integer" in trace.skipped[1].message
    assert "date and time" in trace.skipped[2].message
    assert "fields" in trace.skipped[3].message
    assert trace.duration_s == pytest.approx(0.75) and trace.mean_rate == pytest.approx(3 / 0.75)


def test_fail_policy_stops_at_the_first_bad_line(tmp_path):
    path = write(tmp_path, "azure.csv", AZURE)
    with pytest.raises(TraceError, match=r"^.*azure\.csv:4: expected a non-negative integer for 'ContextTokens'") as e:
        read_trace(path, on_bad_row="fail")
    assert e.value.line == 4 and "\n" not in str(e.value)


def test_crlf_and_byte_order_mark(tmp_path):
    text = (
        "\ufeffTIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.5,1,2\r\n\r\n2023-11-16 18:15:47,x,2\r\n"
    )
    trace = read_trace(write(tmp_path, "crlf.csv", text))
    assert trace.format == "azure" and len(trace) == 1 and [p.line for p in trace.skipped] == [4]


BURST = (
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "5,ChatGPT,472,18,490,Conversation log\n"
    "45,ChatGPT,1087,0,1087,Conversation log\n"  # failed request
    "118,GPT-4,417,276,693,API log\n"
    "-,GPT-4,1,1,2,API log\n"  # bad timestamp
    "140.5,GPT-4,,1,2,API log\n"  # missing request tokens
)


def test_burstgpt_zero_response_tokens_mark_failures(tmp_path):
    trace = read_trace(write(tmp_path, "burst.csv", BURST))
    assert trace.format == "burstgpt"
    assert trace.offsets_s.tolist() == [0.0, 40.0, 113.0]
    assert trace.failed.tolist() == [False, True, False]
    assert trace.output_tokens.tolist() == [18, 0, 276]
    assert [(p.line, "Timestamp" in p.message) for p in trace.skipped] == [(5, True), (6, False)]
    assert "missing value for 'Request tokens'" in trace.skipped[1].message


MOONCAKE = "\n".join(
    [
        '{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}',
        '{"timestamp": 250, "input_length": 1100, "output_length": 3, "hash_ids": [0, 1, 2]}',
        '{"timestamp": 100, "input_length": 512, "output_length": 7, "hash_ids": [0]}',
        '{"timestamp": 300, "input_length": 1000, "output_length": 7, "hash_ids": [5]}',  # 4: too few ids
        "not json",  # 5
        "[1, 2]",  # 6
        '{"timestamp": 400, "input_length": 10, "output_length": 7, "hash_ids": ["a"]}',  # 7
        '{"timestamp": 500, "input_length": 10, "hash_ids": [9]}',  # 8: no output_length
        "",
        '{"timestamp": 600.5, "input_length": 1, "output_length": 1, "hash_ids": [4]}',  # 10
        '{"timestamp": 700, "input_length": 0, "output_length": 1, "hash_ids": []}',  # 11: no prompt to send
    ]
)


def test_mooncake_fixture(tmp_path):
    trace = read_trace(write(tmp_path, "mc.jsonl", MOONCAKE))
    assert trace.format == "mooncake"
    assert trace.offsets_s.tolist() == pytest.approx([0.0, 0.1, 0.25, 0.6005])
    assert trace.prefix_blocks == [(0, 1), (0,), (0, 1, 2), (4,)]
    assert trace.prompt_tokens.tolist() == [1000, 512, 1100, 1]
    assert [p.line for p in trace.skipped] == [4, 5, 6, 7, 8, 11]
    assert "expected 2 hash_ids" in trace.skipped[0].message
    assert "missing field 'output_length'" in trace.skipped[4].message
    assert trace.skipped[5].message == "expected at least 1 prompt token for 'input_length', got 0"
    assert trace.block_size == 512
    # A different block size changes what counts as consistent.
    small = read_trace(
        write(
            tmp_path, "mc16.jsonl", '{"timestamp": 0, "input_length": 40, "output_length": 1, "hash_ids": [1, 2, 3]}'
        ),
        block_size=16,
    )
    assert small.prefix_blocks == [(1, 2, 3)] and small.block_size == 16


def test_lengths_fixture_has_no_timestamps(tmp_path):
    text = "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n74,918,992,0.08\n290,905,1195,0.32\n1.5,2,3,4\n"
    trace = read_trace(write(tmp_path, "lengths.csv", text))
    assert trace.format == "lengths" and not trace.has_timestamps
    assert trace.offsets_s.tolist() == [0.0, 0.0]
    assert trace.prompt_tokens.tolist() == [74, 290] and trace.output_tokens.tolist() == [918, 905]
    assert [p.line for p in trace.skipped] == [4]
    assert math.isnan(trace.mean_rate) and trace.duration_s == 0.0


def test_jsonl_prompts_and_messages(tmp_path):
    from surgelab.tokenizer import BuiltinTokenizer

    count = BuiltinTokenizer().count
    records = [
        {"prompt": "Tell me a story about a cat.", "output_tokens": 128},
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]},
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Describe"}, {"type": "image_url"}]},
                {"role": "assistant", "content": "A red square on white."},
            ]
        },
        {"prompt": 42},  # 4: not text
        {"question": "?"},  # 5: neither prompt nor messages
        {"prompt": "x", "output_tokens": 2.5},  # 6: not an integer
        {"prompt": "y", "output_tokens": None},  # 7: null is no output length
    ]
    lines = [json.dumps(r) for r in records]
    trace = read_trace(write(tmp_path, "prompts.jsonl", "\n".join(lines) + "\n"))
    assert trace.format == "jsonl" and not trace.has_timestamps
    assert trace.texts == ["Tell me a story about a cat.", "Be brief.\nHi there", "Describe", "y"]
    assert trace.prompt_tokens.tolist() == [count(t) for t in trace.texts]
    assert trace.output_tokens.tolist() == [128, -1, count("A red square on white."), -1]
    assert [p.line for p in trace.skipped] == [4, 5, 6]
    assert "'prompt' or 'messages'" in trace.skipped[1].message


def test_jsonl_prompts_with_a_timestamp_column(tmp_path):
    lines = [json.dumps({"t": t, "prompt": "a b c", "output_tokens": 4}) for t in (1_000_000, 3_000_000, 2_000_000)]
    trace = read_trace(
        write(tmp_path, "timed.jsonl", "\n".join(lines)),
        format="jsonl",
        columns={"timestamp": "t", "timestamp_unit": "us"},
    )
    assert trace.has_timestamps and trace.offsets_s.tolist() == [0.0, 1.0, 2.0]
    assert trace.lines.tolist() == [1, 3, 2]


SHAREGPT = """[
  {"id": "a", "conversations": [
    {"from": "human", "value": "What is two plus two?"},
    {"from": "gpt", "value": "Four."},
    {"from": "human", "value": "And three plus three?"},
    {"from": "gpt", "value": "Six."}]},
  {"id": "b", "conversations": [{"from": "gpt", "value": "Hello!"}]},
  {"id": "c", "conversations": "oops"},
  {"id": "d", "conversations": [
    {"from": "gpt", "value": "I start."},
    {"from": "human", "value": "Then me, with a longer question."},
    {"from": "gpt", "value": "A longer answer, in several words."}]},
  {"id": "e", "conversations": [{"from": "human", "value": "Anyone?"}]}
]
"""


def test_sharegpt_pairs_the_first_human_turn_with_its_reply(tmp_path):
    from surgelab.tokenizer import BuiltinTokenizer

    count = BuiltinTokenizer().count
    path = write(tmp_path, "sharegpt.json", SHAREGPT)
    trace = read_trace(path)
    assert trace.format == "sharegpt" and not trace.has_timestamps
    assert trace.texts == ["What is two plus two?", "Then me, with a longer question."]
    assert trace.prompt_tokens.tolist() == [count(t) for t in trace.texts]
    assert trace.output_tokens.tolist() == [count("Four."), count("A longer answer, in several words.")]
    assert trace.lines.tolist() == [2, 9]
    assert [p.line for p in trace.skipped] == [7, 8, 13]
    assert "no human turn" in trace.skipped[0].message
    assert "no gpt reply" in trace.skipped[2].message
    # Conversations without a pair are not errors; a malformed one is.
    with pytest.raises(TraceError, match=r"sharegpt\.json:8: expected an object with 'conversations'"):
        read_trace(path, on_bad_row="fail")


def test_sharegpt_broken_json_names_the_line(tmp_path):
    path = write(tmp_path, "broken.json", '[\n {"conversations": []},\n {"conversations": [}\n]')
    with pytest.raises(TraceError, match=r"broken\.json:3: expected a JSON conversation object"):
        read_trace(path)


def test_generic_csv_with_a_column_mapping(tmp_path):
    text = "when_ms,in,out,extra\n1500,10,20,x\n500,11,21,y\n2500,,22,z\n"
    columns = {"timestamp": "when_ms", "timestamp_unit": "ms", "prompt_tokens": "in", "output_tokens": "out"}
    trace = read_trace(write(tmp_path, "custom.csv", text), format="csv", columns=columns)
    assert trace.format == "csv" and trace.offsets_s.tolist() == [0.0, 1.0]
    assert trace.prompt_tokens.tolist() == [11, 10] and [p.line for p in trace.skipped] == [4]
    # auto + columns on an unknown header picks the generic reader
    assert read_trace(tmp_path / "custom.csv", columns=columns).format == "csv"


def test_generic_jsonl_with_a_column_mapping(tmp_path):
    lines = [json.dumps({"ts": f"2024-01-01T00:00:0{i}", "p": 5 + i, "o": 9}) for i in (0, 2)]
    columns = {"timestamp": "ts", "timestamp_unit": "datetime", "prompt_tokens": "p", "output_tokens": "o"}
    trace = read_trace(write(tmp_path, "custom.jsonl", "\n".join(lines)), format="csv", columns=columns)
    assert trace.offsets_s.tolist() == [0.0, 2.0] and trace.prompt_tokens.tolist() == [5, 7]


def test_preset_names_can_be_overridden(tmp_path):
    text = "TIMESTAMP,Prompt,GeneratedTokens\n2023-11-16 18:15:46,3,4\n"
    trace = read_trace(write(tmp_path, "renamed.csv", text), format="azure", columns={"prompt_tokens": "Prompt"})
    assert trace.prompt_tokens.tolist() == [3]


@pytest.mark.parametrize(
    ("name", "text", "fmt"),
    [
        ("a.csv", AZURE, "azure"),
        ("b.csv", BURST, "burstgpt"),
        ("m.jsonl", MOONCAKE, "mooncake"),
        ("l.csv", "num_prefill_tokens,num_decode_tokens\n1,2\n", "lengths"),
        ("p.jsonl", '{"prompt": "hi", "output_tokens": 3}\n', "jsonl"),
        ("s.json", SHAREGPT, "sharegpt"),
        ("no-extension", "\n\n" + BURST, "burstgpt"),
    ],
)
def test_auto_detection(tmp_path, name, text, fmt):
    assert read_trace(write(tmp_path, name, text)).format == fmt


@pytest.mark.parametrize(
    ("text", "kwargs", "message"),
    [
        ("", {}, r"x:\s*empty file$"),
        ("\n \n", {}, r"empty file"),
        ("a,b,c\n1,2,3\n", {}, r"x:1: cannot tell the format from the first line 'a,b,c'"),
        ('{"foo": 1}\n', {}, r"x:1: cannot tell the JSONL format"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n", {}, r"x: no valid rows$"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\nx,1,1\n", {}, r"no valid rows; 1 skipped, the first at line 2"),
        ("a,b\n1,2\n", {"format": "azure"}, r"x:1: expected a column named 'TIMESTAMP' in the header"),
        ("a,b\n1,2\n", {"format": "csv"}, r"needs columns="),
        ("a,b\n1,2\n", {"columns": {"prompt_tokenz": "a"}}, r"unknown key 'prompt_tokenz'"),
        ("a,b\n1,2\n", {"columns": {"prompt_tokens": "a", "timestamp_unit": "h"}}, r"timestamp_unit must be one of"),
        (b"a,b\n\xff\xfe\n", {"format": "lengths"}, r"x:2: expected UTF-8 text"),
        ("[1, 2", {}, r"x:1: expected ',' or ']'"),
        ('[{"conversations": []}] trailing', {}, r"expected nothing after the list"),
    ],
)
def test_unusable_files_raise_one_line_trace_errors(tmp_path, text, kwargs, message):
    with pytest.raises(TraceError, match=message) as e:
        read_trace(write(tmp_path, "x", text), **kwargs)
    assert "\n" not in str(e.value)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(TraceError, match="cannot read the file"):
        read_trace(tmp_path / "nope.csv")
    with pytest.raises(TraceError, match="cannot read the file"):
        read_trace(tmp_path)


def test_bad_arguments_are_value_errors(tmp_path):
    path = write(tmp_path, "l.csv", "num_prefill_tokens,num_decode_tokens\n1,2\n")
    for kwargs in ({"format": "parquet"}, {"on_bad_row": "ignore"}, {"block_size": 0}):
        with pytest.raises(ValueError):
            read_trace(path, **kwargs)
    assert set(FORMATS) >= {"azure", "burstgpt", "mooncake", "lengths", "jsonl", "sharegpt", "csv", "auto"}


def test_trace_checks_its_columns():
    trace = Trace(offsets_s=[0.0, 1.0, 3.0], prompt_tokens=[1, 2, 3], output_tokens=[4, 5, 6])
    assert len(trace) == 3 and trace.mean_rate == pytest.approx(2 / 3) and trace.failed.tolist() == [False] * 3
    with pytest.raises(ValueError, match="prompt_tokens"):
        Trace(offsets_s=[0.0, 1.0], prompt_tokens=[1], output_tokens=[4, 5])
    with pytest.raises(ValueError, match="never decrease"):
        Trace(offsets_s=[0.0, 2.0, 1.0], prompt_tokens=[1, 2, 3], output_tokens=[4, 5, 6])
    with pytest.raises(ValueError, match="finite"):
        Trace(offsets_s=[0.0, float("nan")], prompt_tokens=[1, 2], output_tokens=[4, 5])
    with pytest.raises(ValueError, match="read-only"):
        trace.prompt_tokens[0] = 9


# --- fuzzing: any bytes give a Trace or a TraceError, nothing else --------------------------

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
HEADERS = [
    "TIMESTAMP,ContextTokens,GeneratedTokens",
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type",
    "num_prefill_tokens,num_decode_tokens",
]
FIELD_TEXT = st.text(alphabet='0123456789-.,:" eE\nTxZ[]{}', max_size=30)
FIELD_NAMES = ["timestamp", "input_length", "output_length", "hash_ids", "prompt", "messages", "output_tokens"]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(FIELD_NAMES + ["role", "content", "from", "value", "conversations"]), inner, max_size=5
        )
    ),
    max_leaves=12,
)


def _read_every_way(path: Path) -> None:
    for fmt in FORMATS:
        for policy in ("skip", "fail"):
            columns = {"prompt_tokens": "input_length", "timestamp": "timestamp"} if fmt == "csv" else None
            try:
                trace = read_trace(path, format=fmt, columns=columns, on_bad_row=policy)
            except TraceError as error:
                assert "\n" not in str(error)
                continue
            assert len(trace) > 0
            assert trace.offsets_s[0] == 0.0 and np.all(np.diff(trace.offsets_s) >= 0)
            assert np.all(trace.prompt_tokens >= 0)


@FUZZ
@given(data=st.binary(max_size=300))
def test_fuzz_random_bytes(tmp_path, data):
    path = tmp_path / "fuzz.bin"
    path.write_bytes(data)
    _read_every_way(path)


@FUZZ
@given(header=st.sampled_from(HEADERS), rows=st.lists(st.lists(FIELD_TEXT, max_size=7), max_size=6))
def test_fuzz_csv_rows(tmp_path, header, rows):
    path = tmp_path / "fuzz.csv"
    path.write_text("\n".join([header] + [",".join(r) for r in rows]), encoding="utf-8")
    _read_every_way(path)


@FUZZ
@given(records=st.lists(st.dictionaries(st.sampled_from(FIELD_NAMES), JSON_VALUES, max_size=6), max_size=5))
def test_fuzz_json_records(tmp_path, records):
    jsonl = tmp_path / "fuzz.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    _read_every_way(jsonl)
    whole = tmp_path / "fuzz.json"
    whole.write_text(json.dumps([{"conversations": list(r.values())} for r in records], indent=1), encoding="utf-8")
    _read_every_way(whole)


def test_generic_csv_with_hash_ids_and_prompt_text(tmp_path):
    text = 'ts,n,out,ids,prompt\n0,600,5,"[3, 4]",hello world\n1,10,5,"[3]",again\n2,10,5,"3 4",bad ids\n'
    columns = {"timestamp": "ts", "prompt_tokens": "n", "output_tokens": "out", "hash_ids": "ids", "prompt": "prompt"}
    trace = read_trace(write(tmp_path, "ids.csv", text), format="csv", columns=columns)
    assert trace.prefix_blocks == [(3, 4), (3,)] and trace.texts == ["hello world", "again"]
    assert trace.prompt_tokens.tolist() == [600, 10]  # a prompt_tokens column wins over counting the text
    assert [p.line for p in trace.skipped] == [4] and "block ids" in trace.skipped[0].message


def test_rows_past_the_token_cap_are_bad_rows_like_the_flags(tmp_path):
    """Seen (issue 29): a 99,999,999-token row was built and sent, past the cap --prompt-tokens enforces."""
    path = write(tmp_path, "lengths.csv", "num_prefill_tokens,num_decode_tokens\n10,5\n99999999,5\n10,3000000\n2000000,2000000\n")
    trace = read_trace(path)
    assert trace.prompt_tokens.tolist() == [10, 2_000_000] and trace.lines.tolist() == [2, 5]
    assert trace.skipped == [
        RowProblem(3, "99,999,999 tokens for 'num_prefill_tokens' is more than any model takes (at most 2,000,000)"),
        RowProblem(4, "3,000,000 tokens for 'num_decode_tokens' is more than any model takes (at most 2,000,000)"),
    ]
    with pytest.raises(TraceError, match=r"lengths\.csv:3: 99,999,999 tokens for 'num_prefill_tokens' is more than"):
        read_trace(path, on_bad_row="fail")


def test_empty_prompts_are_bad_rows_not_requests(tmp_path):
    """Seen (issue 29): an empty prompt was sent as a request."""
    rows = [{"prompt": "hello there"}, {"prompt": ""}, {"prompt": " \n "},
            {"messages": [{"role": "user", "content": ""}]}, {"prompt": "fine", "output_tokens": 4}]  # fmt: skip
    trace = read_trace(write(tmp_path, "p.jsonl", "\n".join(json.dumps(r) for r in rows)))
    assert trace.texts == ["hello there", "fine"]
    assert [(p.line, p.message) for p in trace.skipped] == [(2, "empty prompt"), (3, "empty prompt"), (4, "empty prompt")]
    lengths = read_trace(write(tmp_path, "l.csv", "num_prefill_tokens,num_decode_tokens\n0,5\n7,5\n"))
    assert lengths.prompt_tokens.tolist() == [7]
    assert lengths.skipped == [RowProblem(2, "expected at least 1 prompt token for 'num_prefill_tokens', got 0")]
