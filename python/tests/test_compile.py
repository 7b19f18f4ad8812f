"""GrammarCompiler: every front end, the options, and typed errors with their places."""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

import formwork

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}


def accepts(compiled: formwork.CompiledGrammar, text: str) -> bool:
    """Whether `text` (consumed as text) is a complete output of `compiled`."""
    m = formwork.GrammarMatcher(compiled)
    return m.accept_string(text) and m.is_accepting()


def test_json_schema_options(compiler: formwork.GrammarCompiler) -> None:
    compact = compiler.compile_json_schema(PERSON, any_whitespace=False)
    assert accepts(compact, '{"name":"Ada","age":36}')
    assert not accepts(compact, '{"name": "Ada", "age": 36}')
    assert not accepts(compact, '{"name":"Ada","age":-1}')
    assert compact.backend in ("operators", "earley") and compact.warnings == []
    assert compact.tokenizer_info.vocab_size == compiler.tokenizer_info.vocab_size
    assert "CompiledGrammar(" in repr(compact)
    free = compiler.compile_json_schema(json.dumps(PERSON), any_whitespace=True)
    assert accepts(free, '{ "name" : "Ada",\n  "age": 36 }')
    bounded = compiler.compile_json_schema(PERSON, max_whitespace_cnt=1)
    assert accepts(bounded, '{"name": "Ada", "age": 36}')
    assert not accepts(bounded, '{"name":  "Ada", "age": 36}')
    # strict_mode (xgrammar's meaning): no undeclared properties unless the schema allows them.
    assert not accepts(compact, '{"name":"Ada","age":36,"x":1}')
    loose = compiler.compile_json_schema(PERSON, any_whitespace=False, strict_mode=False)
    assert accepts(loose, '{"name":"Ada","age":36,"x":1}')
    assert not accepts(compact, '{"age":36,"name":"Ada"}')
    any_order = compiler.compile_json_schema(PERSON, any_whitespace=False, any_order=True)
    assert accepts(any_order, '{"age":36,"name":"Ada"}')
    assert accepts(compiler.compile_json_schema(PERSON, any_whitespace=False, separators=(",", ":")), '{"name":"A","age":1}')


def test_any_order_holds_wide_objects(compiler: formwork.GrammarCompiler) -> None:
    # Twenty properties: the matcher keeps the names written, so the order is free at any size.
    names = [f"p{i}" for i in range(20)]
    schema = {
        "type": "object",
        "properties": {n: {"type": "integer"} for n in names},
        "required": ["p0", "p19"],
        "additionalProperties": False,
    }
    wide = compiler.compile_json_schema(schema, any_whitespace=False, any_order=True)
    backwards = ",".join(f'"{n}":{i}' for i, n in reversed(list(enumerate(names))))
    assert accepts(wide, "{" + backwards + "}")
    assert not accepts(wide, '{"p19":1,"p0":2,"p19":3}')
    assert not accepts(wide, '{"p19":1,"p3":2}')


def test_order_fallback_keeps_the_schema_order_of_what_any_order_refuses(
    compiler: formwork.GrammarCompiler,
) -> None:
    # Fourteen properties under two branches of an array: no key set holds their objects, and
    # their 2^n grammar is past its limits.
    def items(required: str) -> dict:
        names = {f"p{i}": {"type": "integer"} for i in range(14)}
        item = {"type": "object", "properties": names, "required": [required], "additionalProperties": False}
        return {"type": "array", "items": item}

    schema = {"anyOf": [items("p0"), items("p1")]}
    with pytest.raises(formwork.LimitError):
        compiler.compile_json_schema(schema, any_whitespace=False, any_order=True, order_fallback=False)
    kept = compiler.compile_json_schema(schema, any_whitespace=False, any_order=True)
    assert [w for w in kept.warnings if "kept in the schema's order" in w] != []
    assert accepts(kept, '[{"p0":1,"p12":2}]')
    assert not accepts(kept, '[{"p12":2,"p0":1}]')


def test_json_schema_from_a_pydantic_style_class(compiler: formwork.GrammarCompiler) -> None:
    class Model:
        @staticmethod
        def model_json_schema() -> dict:
            return {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}

    assert accepts(compiler.compile_json_schema(Model, any_whitespace=False), '{"ok":true}')


def test_recursive_schema_runs_on_earley(compiler: formwork.GrammarCompiler) -> None:
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    compiled = compiler.compile_json_schema(tree, any_whitespace=False)
    assert compiled.backend == "earley"
    assert accepts(compiled, '{"kids":[{"kids":[]},{}]}')


def test_lenient_schema_reports_warnings_with_pointers(compiler: formwork.GrammarCompiler) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "string", "format": "idn-email"}}}
    with pytest.raises(formwork.UnsupportedError) as e:
        compiler.compile_json_schema(schema)
    assert e.value.pointer == "/properties/n/format"
    assert e.value.location == "#/properties/n/format"
    assert isinstance(e.value, formwork.CompileError) and isinstance(e.value, ValueError)
    compiled = compiler.compile_json_schema(schema, lenient=True)
    assert any("/properties/n/format" in w for w in compiled.warnings)


def test_schema_errors_carry_places(compiler: formwork.GrammarCompiler) -> None:
    with pytest.raises(formwork.GrammarSyntaxError) as e:
        compiler.compile_json_schema('{"type": "object",\n "properties": }')
    assert (e.value.line, e.value.source) == (2, "<json_schema>") and e.value.col > 1
    with pytest.raises(formwork.CompileError) as e:
        compiler.compile_json_schema({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}})
    assert e.value.pointer is not None and e.value.pointer.startswith("/properties/a")
    with pytest.raises(formwork.UnsupportedError):
        compiler.compile_json_schema(PERSON, indent=2)
    with pytest.raises(formwork.UnsupportedError):
        compiler.compile_json_schema(PERSON, separators=(", ", ": "))


def test_builtin_json_grammar(compiler: formwork.GrammarCompiler) -> None:
    compiled = compiler.compile_builtin_json_grammar()
    assert accepts(compiled, '{"a": [1, {"b": null}]}')
    assert accepts(compiled, "[true]")
    assert not accepts(compiled, '"just a string"')


def test_regex_and_its_errors(compiler: formwork.GrammarCompiler) -> None:
    compiled = compiler.compile_regex(r"\d{3}-[a-z]+")
    assert accepts(compiled, "123-abc") and not accepts(compiled, "12-abc")
    with pytest.raises(formwork.UnsupportedError) as e:
        compiler.compile_regex(r"(?<=a)b")
    assert "look-around" in str(e.value)
    with pytest.raises(formwork.GrammarSyntaxError) as e:
        compiler.compile_regex(r"a(b")
    assert e.value.col is not None


GBNF = """root ::= expr
expr ::= term (("+" | "-") term)*
term ::= [0-9]+ | "(" expr ")"
"""


def test_gbnf_grammar_and_its_errors(compiler: formwork.GrammarCompiler) -> None:
    compiled = compiler.compile_grammar(GBNF)
    assert compiled.backend == "earley"
    assert accepts(compiled, "1+(2-34)") and not accepts(compiled, "1+")
    with pytest.raises(formwork.GrammarSyntaxError) as e:
        compiler.compile_grammar('root ::= "a"\nexpr ::= ( "b"\n')
    assert e.value.source == "<grammar>" and e.value.line in (2, 3)
    with pytest.raises(formwork.UndefinedError) as e:
        compiler.compile_grammar("root ::= missing")
    assert e.value.line == 1
    with pytest.raises(formwork.UnsupportedError):
        compiler.compile_grammar(GBNF, root_rule_name="expr")


def test_structural_tags(compiler: formwork.GrammarCompiler) -> None:
    tags = [
        formwork.StructuralTagItem(begin="<function=weather>", schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}, end="</function>"),
        formwork.StructuralTagItem(begin="<function=time>", schema='{"type": "object", "properties": {}}', end="</function>"),
    ]
    compiled = compiler.compile_structural_tag(tags, ["<function="])
    assert accepts(compiled, 'Let me look. <function=weather>{"city":"Oslo"}</function> Done.')
    assert accepts(compiled, "<function=time>{}</function>")
    assert not accepts(compiled, "<function=weather>{}</function>")
    assert not accepts(compiled, "<function=other>{}</function>")
    assert "StructuralTagItem(" in repr(tags[0])
    with pytest.raises(formwork.InvalidError) as e:
        compiler.compile_structural_tag([formwork.StructuralTagItem("<x>", {}, "</x>")], ["<function="])
    assert e.value.pointer == "/tags/0/begin"


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}


def test_tool_call_formats(compiler: formwork.GrammarCompiler) -> None:
    qwen = compiler.compile_tool_calls([WEATHER_TOOL], format="qwen")
    assert accepts(qwen, 'Sure.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>')
    assert not accepts(qwen, '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>')
    llama = compiler.compile_tool_calls([WEATHER_TOOL], format="llama31", require_call=True)
    assert accepts(llama, '<function=get_weather>{"city":"Oslo","unit":"celsius"}</function>')
    assert not accepts(llama, "no call at all")
    harmony = compiler.compile_tool_calls(json.dumps([WEATHER_TOOL]), format="harmony-text", forbid=["<think>"])
    assert accepts(
        harmony, '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>'
    )
    assert not accepts(harmony, "<think>")
    # Harmony's markers as special tokens need a vocabulary that has them (o200k_harmony).
    with pytest.raises(formwork.UnknownSpecialTokenError) as e:
        compiler.compile_tool_calls([WEATHER_TOOL], format="harmony")
    assert "<|" in str(e.value)
    with pytest.raises(formwork.InvalidError) as e:
        compiler.compile_tool_calls([WEATHER_TOOL], format="xml")
    assert e.value.pointer == "/format"
    with pytest.raises(formwork.InvalidError) as e:
        compiler.compile_tool_calls([{"type": "function", "function": {"parameters": {}}}])
    assert e.value.pointer == "/tools/0/function/name"


REQUEST = 'reference_lookup(topics: 1..20, ids: {"1", "1.1", "2"})'


def test_templates_and_requests(compiler: formwork.GrammarCompiler) -> None:
    assert {"outline", "reference_lookup", "tool_call"} <= set(compiler.structures())
    compiled = compiler.compile_request(REQUEST)
    assert compiled.backend == "operators"
    assert accepts(compiled, '[{"topic": [3, 12], "reference": ["1.1", "2"]}]')
    assert not accepts(compiled, '[{"topic": [21], "reference": ["1.1"]}]')
    as_json = compiler.compile_request(
        {"reference_lookup": {"topics": {"$range": [1, 20]}, "ids": {"$choice": ["1", "1.1", "2"]}}}
    )
    assert accepts(as_json, '[{"topic": [3, 12], "reference": ["1.1", "2"]}]')
    builtin = compiler.compile_request("regex(pattern: /[ab]+/)")
    assert accepts(builtin, "abba")


def test_register_templates_from_paths_and_sources(qwen3: formwork.TokenizerInfo, tmp_path) -> None:
    c = formwork.GrammarCompiler(qwen3, cache_bytes=1 << 20, max_threads=2)
    assert c.max_threads == 2 and c.tokenizer_info.vocab_size == qwen3.vocab_size
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "pick.fw").write_text('pick(ids: choice) ::= "[" ids "]"\n')
    (tmp_path / "no.fw").write_text('no ::= "no"\n')
    c.register_templates(tmp_path / "dir")
    c.register_templates({"yes.fw": 'yes ::= "yes"\n'})
    c.register_templates([str(tmp_path / "no.fw")])
    assert {"pick", "yes", "no"} <= set(c.structures())
    assert accepts(c.compile_request('pick(ids: {"a", "b"})'), "[b]")
    assert accepts(c.compile_request("yes"), "yes")
    assert c.get_cache_size_bytes() >= 0
    assert "GrammarCompiler(" in repr(c)


def test_max_threads_bounds_concurrent_compilations_without_changing_results(qwen3: formwork.TokenizerInfo) -> None:
    patterns = [f"(a|b){{{n}}}c[0-9]{{1,{n}}}" for n in range(1, 13)]
    for max_threads in (1, 3):
        c = formwork.GrammarCompiler(qwen3, max_threads=max_threads)
        with ThreadPoolExecutor(max_workers=6) as pool:
            compiled = list(pool.map(c.compile_regex, patterns))
        for n, grammar in enumerate(compiled, start=1):
            assert accepts(grammar, "a" * n + "c" + "7" * n)
            assert not accepts(grammar, "a" * (n + 1) + "c7")
    with pytest.raises(ValueError):
        formwork.GrammarCompiler(qwen3, max_threads=0)


def test_template_and_request_errors_carry_places(qwen3: formwork.TokenizerInfo, compiler: formwork.GrammarCompiler) -> None:
    c = formwork.GrammarCompiler(qwen3)
    with pytest.raises(formwork.CompileError) as e:
        c.register_templates({"bad.fw": 'ok ::= "x"\nbroken ::= ( "y"\n'})
    assert e.value.source == "bad.fw" and e.value.line == 2
    assert c.structures() == []  # nothing registered on error
    with pytest.raises(formwork.GrammarSyntaxError) as e:
        compiler.compile_request("reference_lookup(topics: 1..)")
    assert (e.value.source, e.value.line, e.value.col) == ("<request>", 1, 29)
    assert e.value.location == "<request>:1:29"
    with pytest.raises(formwork.UnsupportedError):
        compiler.compile_request("nothing_like_this(a: 1)")
    with pytest.raises(formwork.CompileError) as e:
        compiler.compile_request({"reference_lookup": {"topics": "oops", "ids": {"$choice": ["1"]}}})
    assert e.value.pointer == "/reference_lookup/topics"
