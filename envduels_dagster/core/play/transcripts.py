"""Episodes a person can read: cold and hinted play of the same seed side by side, turn by turn.

Why: the warehouse keeps every transcript (``episodes.transcript``, the chat as JSON), but reading one took
SQL or ``envduels play --json --transcript``. Like inspect-ai's log viewer, a pair's episodes are one command
(``envduels show``) or one click (the experiment report's episode pages) away, as a conversation: each turn's
observation and the model's action, the hint the hinted side was given, and the outcome. Pure functions of
the ``episodes`` and ``environments`` rows; nothing here writes.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from html import escape

import pandas as pd

EPISODE_COLUMNS = ("env_id, author, solver, round, condition, seed, status, stop_reason, turns, final_reward, "
                   "error, transcript")


@dataclass(frozen=True)
class Turn:
    observation: str  # what the environment showed before the action (the first one holds the hint when given)
    action: str  # the model's reply


def turns(transcript: str | list | None) -> list[Turn]:
    """The transcript as (observation, action) turns; the system prompt is left out. A final observation
    without a reply (the episode ended there) is a turn with an empty action."""
    messages = json.loads(transcript) if isinstance(transcript, str) else list(transcript or [])
    out, pending = [], None
    for m in messages:
        role, content = m.get("role"), str(m.get("content", ""))
        if role == "user":
            if pending is not None:
                out.append(Turn(pending, ""))
            pending = content
        elif role == "assistant":
            out.append(Turn(pending or "", content))
            pending = None
    if pending is not None:
        out.append(Turn(pending, ""))
    return out


def load(conn, target: str, solver: str | None = None, seed: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(environments rows, episodes rows) for ``target``: an environment id, or a pair ``author|solver``.

    Raises ``LookupError`` naming what exists when nothing matches."""
    params: list[object]
    if "|" in target:
        author, pair_solver = target.split("|", 1)
        if solver is not None and solver != pair_solver:
            raise LookupError(f"pair {target!r} and --solver {solver!r} disagree")
        where, params = "author = ? AND solver = ?", [author, pair_solver]
    else:
        where, params = "env_id = ?", [target]
        if solver is not None:
            where, params = where + " AND solver = ?", [*params, solver]
    if seed is not None:
        where, params = where + " AND seed = ?", [*params, seed]
    eps = conn.execute(f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE {where} "
                       "ORDER BY env_id, solver, seed, condition", params).df()
    if eps.empty:
        raise LookupError(_nothing_found(conn, target, solver, seed))
    envs = conn.execute("SELECT env_id, author, round, domain, class_name, max_turns, hint FROM environments "
                        "WHERE env_id IN (SELECT UNNEST(?::VARCHAR[]))", [sorted(set(eps["env_id"]))]).df()
    return envs, eps


def _nothing_found(conn, target: str, solver: str | None, seed: int | None) -> str:
    if "|" in target:
        pairs = [f"{a}|{s}" for a, s in conn.execute(
            "SELECT DISTINCT author, solver FROM episodes ORDER BY 1, 2 LIMIT 12").fetchall()]
        return f"no episodes for pair {target!r}" + (f" seed {seed}" if seed is not None else "") + (
            f"; pairs with episodes include: {', '.join(pairs)}" if pairs else "; the warehouse has no episodes yet")
    known = [e for (e,) in conn.execute("SELECT DISTINCT env_id FROM episodes ORDER BY 1 LIMIT 8").fetchall()]
    if target in {e for (e,) in conn.execute("SELECT DISTINCT env_id FROM episodes WHERE env_id = ?",
                                                [target]).fetchall()}:
        solvers = [s for (s,) in conn.execute("SELECT DISTINCT solver FROM episodes WHERE env_id = ? ORDER BY 1",
                                              [target]).fetchall()]
        return (f"no episodes of {target!r} for solver {solver!r}" + (f" seed {seed}" if seed is not None else "")
                + f"; its solvers: {', '.join(solvers)}")
    return f"no episodes for environment {target!r}" + (
        f"; environment ids look like: {', '.join(known)}" if known else "; the warehouse has no episodes yet")


def _outcome(ep) -> str:
    if ep is None:
        return "not played"
    reason = f", {ep.stop_reason}" if isinstance(ep.stop_reason, str) else ""
    error = f" ({ep.error})" if isinstance(ep.error, str) and ep.error else ""
    return f"{ep.status}{reason}, {int(ep.turns or 0)} turns{error}"


def matched(eps: pd.DataFrame):
    """Yield (env_id, solver, seed, cold episode or None, hinted episode or None) in order."""
    for (env_id, solver, seed), grp in eps.groupby(["env_id", "solver", "seed"], sort=True):
        by = {r.condition: r for r in grp.itertuples(index=False)}
        yield env_id, solver, int(seed), by.get("cold"), by.get("hinted")


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for raw in (text or "").splitlines() or [""]:
        lines += textwrap.wrap(raw, width) or [""]
    return lines


def side_by_side_text(envs: pd.DataFrame, eps: pd.DataFrame, width: int = 100) -> str:
    """Plain text: per environment its hint; per (solver, seed) the cold and hinted episodes in two columns,
    each turn's observation (``obs``) and action (``act``), then the outcome of each side."""
    col = max(20, (width - 3) // 2)
    hints = dict(zip(envs["env_id"], envs["hint"]))
    out: list[str] = []
    for env_id, solver, seed, cold, hinted in matched(eps):
        any_ep = cold if cold is not None else hinted
        out += ["=" * (2 * col + 3), f"{env_id} (author {any_ep.author}, round {int(any_ep.round)}) played by "
                f"{solver}, seed {seed}", "hint given to the hinted side:"]
        out += ["  " + line for line in _wrap(str(hints.get(env_id) or "(none)"), 2 * col)]
        out.append(f"{'COLD: ' + _outcome(cold):<{col}} | {'HINTED: ' + _outcome(hinted)}")
        left, right = (turns(e.transcript) if e is not None else [] for e in (cold, hinted))
        for k in range(max(len(left), len(right))):
            out.append(f"{'-- turn ' + str(k + 1) + ' ':-<{col}}-+-{'-- turn ' + str(k + 1) + ' ':-<{col}}")
            a = _turn_lines(left[k] if k < len(left) else None, col)
            b = _turn_lines(right[k] if k < len(right) else None, col)
            for i in range(max(len(a), len(b))):
                out.append(f"{a[i] if i < len(a) else '':<{col}} | {b[i] if i < len(b) else ''}".rstrip())
    return "\n".join(out)


def _turn_lines(turn: Turn | None, col: int) -> list[str]:
    if turn is None:
        return []
    lines = [f"obs: {line}" if i == 0 else f"     {line}" for i, line in enumerate(_wrap(turn.observation, col - 5))]
    if turn.action:
        lines += [f"act: {line}" if i == 0 else f"     {line}" for i, line in enumerate(_wrap(turn.action, col - 5))]
    return lines


def _turns_html(ep) -> str:
    if ep is None:
        return "<p><em>not played</em></p>"
    items = []
    for k, t in enumerate(turns(ep.transcript), 1):
        items.append(f'<div class="turn"><div class="n">turn {k}</div><pre class="obs">{escape(t.observation)}</pre>'
                     + (f'<pre class="act">{escape(t.action)}</pre>' if t.action else "") + "</div>")
    return "".join(items)


def episodes_html(title: str, envs: pd.DataFrame, eps: pd.DataFrame) -> str:
    """One self-contained page: per environment and seed, the cold and hinted conversation side by side."""
    hints = dict(zip(envs["env_id"], envs["hint"]))
    body = [f"<h1>{escape(title)}</h1>"]
    for env_id, solver, seed, cold, hinted in matched(eps):
        body.append(f'<section class="episode" data-env="{escape(env_id)}" data-solver="{escape(solver)}" '
                    f'data-seed="{seed}"><h2>{escape(env_id)}, solver {escape(solver)}, seed {seed}</h2>'
                    f'<p class="hint"><b>hint (hinted side):</b> {escape(str(hints.get(env_id) or "(none)"))}</p>'
                    f'<table><tr><th>cold: {escape(_outcome(cold))}</th><th>hinted: {escape(_outcome(hinted))}</th>'
                    f'</tr><tr><td class="cold">{_turns_html(cold)}</td><td class="hinted">{_turns_html(hinted)}</td>'
                    "</tr></table></section>")
    style = ("body{font-family:sans-serif;margin:20px;max-width:1500px} table{width:100%;border-collapse:collapse;"
             "table-layout:fixed} td,th{vertical-align:top;border:1px solid #ccc;padding:6px} pre{white-space:"
             "pre-wrap;margin:2px 0;font-size:12px} .act{background:#eef4fb} .obs{background:#f7f7f7} .n{color:#777;"
             "font-size:11px} .hint{background:#fff8e0;padding:6px}")
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{escape(title)}</title><style>{style}</style>'
            f'</head><body>{"".join(body)}</body></html>')
