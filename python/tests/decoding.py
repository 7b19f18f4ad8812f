"""The constraints of the decode-loop tests (numpy and transformers), each with an independent
check of a finished output. Every language here is finite or ends quickly under any sampler
(bounded strings and numbers, enums, lists a random choice closes), so a random model must
finish within the token budget; tool calls are made likely by a bias (a model that wants to
call a tool), which the mask keeps honest."""

import json
import re
from dataclasses import dataclass, field
from typing import Callable, Dict, List

import jsonschema

import formwork

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "age", "ok"],
    "additionalProperties": False,
}

TOPICS = range(1, 21)
IDS = ["1", "1.1", "2", "2.1.1"]
LOOKUP = f'reference_lookup(topics: 1..20, ids: {{{", ".join(json.dumps(i) for i in IDS)}}})'
_TOPIC = "|".join(str(t) for t in TOPICS)
_ID = "|".join(re.escape(json.dumps(i)) for i in IDS)
_ENTRY = rf'\{{"topic": \[({_TOPIC})(, ({_TOPIC}))*\], "reference": \[({_ID})(, ({_ID}))*\]\}}'
LOOKUP_RE = re.compile(rf"\[{_ENTRY}(, {_ENTRY})*\]")

ALARM = {
    "type": "object",
    "properties": {
        "hour": {"type": "integer", "minimum": 0, "maximum": 23},
        "repeat": {"type": "boolean"},
        "day": {"enum": ["mon", "tue", "wed"]},
    },
    "required": ["hour", "repeat", "day"],
    "additionalProperties": False,
}
TOOLS = [{"type": "function", "function": {"name": "set_alarm", "parameters": ALARM}}]
CALL_RE = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.S)


def check_person(text: str) -> None:
    jsonschema.validate(json.loads(text), PERSON)


def check_lookup(text: str) -> None:
    assert LOOKUP_RE.fullmatch(text), text


def check_tool_calls(text: str) -> None:
    calls = CALL_RE.findall(text)
    assert calls, f"no tool call in {text!r}"
    for body in calls:
        call = json.loads(body)
        assert set(call) == {"name", "arguments"} and call["name"] == "set_alarm", call
        jsonschema.validate(call["arguments"], ALARM)
    assert "<tool_call>" not in CALL_RE.sub("", text), text


@dataclass
class Constraint:
    label: str
    compile: Callable[[formwork.GrammarCompiler], formwork.CompiledGrammar]
    check: Callable[[str], None]
    # Logit bias by token text (a stand-in model's preferences); the mask decides what is allowed.
    bias: Dict[str, float] = field(default_factory=dict)


CONSTRAINTS: List[Constraint] = [
    Constraint("JSON schema", lambda c: c.compile_json_schema(PERSON, any_whitespace=False), check_person),
    Constraint("template request", lambda c: c.compile_request(LOOKUP), check_lookup),
    Constraint(
        "Qwen tool call",
        lambda c: c.compile_tool_calls(TOOLS, format="qwen", require_call=True),
        check_tool_calls,
        # Wants to call the tool, and to stop once it may (stop beats another call).
        bias={"<tool_call>": 20.0, "<|im_end|>": 40.0},
    ),
]


def bias_ids(info: formwork.TokenizerInfo, bias: Dict[str, float]) -> Dict[int, float]:
    out = {}
    for text, value in bias.items():
        ids = info.encode(text)
        assert len(ids) == 1, f"{text!r} is not one token"
        out[ids[0]] = value
    return out


def render(info: formwork.TokenizerInfo, tokens: List[int]) -> str:
    """The output text of `tokens`, stop tokens dropped."""
    stops = set(info.stop_token_ids)
    return b"".join(info.token_bytes(t) for t in tokens if t not in stops).decode("utf-8")
