"""A newcomer's first run reads well (issue 37): warnings come as one short summary after the
results, an action the spec declares idle is printed as expected with its reason, and a user's
names are printed as given, whatever brackets they hold."""
from pathlib import Path

from kcheck.cli import BAD_INPUT, OK, main

ROOT = Path(__file__).resolve().parent.parent
NEVER_FIRES = (ROOT / "tests" / "specs_reliability" / "never_fires.py").read_text()


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def spec_with(tmp_path, extra: str, name="idle_spec.py") -> Path:
    p = tmp_path / name
    p.write_text(NEVER_FIRES + extra)
    return p


VARIANTS = '''
spec.variant("plain", "as declared", default=True)
spec.variant("also", "the same again")
'''


def test_an_undeclared_idle_action_is_one_counted_warning_and_explain_lists_it(tmp_path, capsys):
    p = spec_with(tmp_path, VARIANTS)
    code, out, err = run(capsys, "check", p, "--all-variants")
    assert code == OK and "plain" in out
    lines = [line for line in err.splitlines() if line.startswith("kcheck: ") and "depth" not in line]
    # one summary line, after the results, with the count and where to read more
    assert len(lines) == 1, err
    assert lines[0].startswith("kcheck: 2 warnings: 2 variant(s) with actions that never took a step")
    assert "--explain" in lines[0] and "docs/warnings.md" in lines[0]
    assert (ROOT / "docs" / "warnings.md").exists()
    code, _, err = run(capsys, "check", p, "--all-variants", "--explain")
    assert err.count("kcheck: warning: never-fires/") == 2 and "action Reset never took a step" in err


def test_a_declared_idle_action_is_expected_with_its_reason(tmp_path, capsys):
    p = spec_with(tmp_path, VARIANTS + 'spec.idle(["Reset"], "x never reaches 3", variants=["plain"])\n')
    code, _, err = run(capsys, "check", p, "--all-variants", "--explain")
    assert code == OK
    assert "kcheck: expected: never-fires/plain: action Reset never takes a step (the spec says: " \
           "x never reaches 3)" in err
    assert "kcheck: warning: never-fires/also: action Reset never took a step" in err
    assert "kcheck: warning: never-fires/plain" not in err
    assert "1 warning:" in err and "1 expected, as the specs declare (actions declared idle)" in err


def test_a_spec_without_variants_declares_idle_actions_for_itself(tmp_path, capsys):
    p = spec_with(tmp_path, 'spec.idle(["Reset"], "x never reaches 3")\n')
    code, _, err = run(capsys, "check", p)
    assert code == OK and "kcheck: no warnings; 1 expected" in err and "x never reaches 3" in err


def test_a_declared_idle_action_that_steps_is_a_stale_declaration(tmp_path, capsys):
    p = spec_with(tmp_path, 'spec.idle(["Step"], "a wrong claim")\n')
    code, _, err = run(capsys, "check", p)
    assert "kcheck: warning: never-fires/default: action Step took a step, but the spec declares " \
           "it idle here (a wrong claim)" in err


def test_idle_naming_no_action_is_an_error_at_its_line(tmp_path, capsys):
    p = spec_with(tmp_path, 'spec.idle(["Resett"], "typo")\n')
    code, _, err = run(capsys, "check", p)
    line = NEVER_FIRES.count("\n") + 1
    assert code == BAD_INPUT and f"idle_spec.py:{line}: idle() names action 'Resett'" in err


def test_names_with_brackets_are_printed_as_given(tmp_path, capsys):
    """rich read 'fix[/]1' as a closing tag (a MarkupError traceback) and '[bold]' as a style."""
    p = spec_with(tmp_path, '\nspec.variant("fix[/]1", "[bold]x", default=True)\n'
                            'spec.idle(["Reset"], "x never reaches [red]3")\n', name="b.py")
    for argv in (["check", p], ["check", p, "--all-variants", "--explain"],
                 ["progress", p, "--all-variants"], ["progress", p]):
        code, out, err = run(capsys, *argv)
        assert code == OK, (argv, err)
        assert "fix[/]1" in out + err and "Traceback" not in err, argv
    code, out, err = run(capsys, "check", p, "--all-variants", "--explain")
    assert "x never reaches [red]3" in err


def test_every_option_of_every_subcommand_has_help_text():
    """Issue 37: `kcheck SUBCOMMAND --help` explains every option and argument it lists."""
    import argparse
    from kcheck.cli import build_parser
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"{name} {' '.join(act.option_strings) or act.dest}"
               for name, p in sub.choices.items() for act in p._actions
               if not isinstance(act, argparse._HelpAction) and not act.help]
    assert len(sub.choices) >= 15 and missing == []
