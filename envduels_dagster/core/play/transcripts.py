"""Episodes a person can read: cold and hinted play of the same seed side by side, turn by turn.

Why: the warehouse keeps every transcript (``episodes.transcript``, the chat as JSON), but reading one took
SQL or ``envduels play --json --transcript``. Like inspect-ai's log viewer, a pair's episodes are one command
(``envduels show``) or one click (the experiment report's episode pages) away, as a conversation: each turn's
observation and the model's action, the hint the hinted side was given, and the outcome. Pure functions of
the ``episodes`` and ``environments`` rows; nothing here writes.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass
from html import escape

import pandas as pd

EPISODE_COLUMNS = ("env_id, author, solver, round, condition, seed, status, stop_reason, turns, final_reward, "
                   "error, transcript")


# The words for a stop (issue 43: "max_turns" and "truncated" named the same stop, the turn limit).
STOP_WORDS = {"terminated": "ended by the environment", "truncated": "turn limit", "max_turns": "turn limit",
              "env_error": "environment error", "llm_error": "model error", "length": "reply cut at max_tokens",
              "stopped_at_budget": "stopped at the budget", "budget_exhausted": "time budget used up"}


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@dataclass(frozen=True)
class Turn:
    observation: str  # what the environment showed before the action (the first one holds the hint when given)
    action: str  # the model's reply
    reward: float | None = None  # what the environment's step on this action returned (None: no step recorded)


def turns(transcript: str | list | None) -> list[Turn]:
    """The transcript as (observation, action, reward) turns; the system prompt is left out. A final
    observation without a reply (the episode ended there) is a turn with an empty action. The trailer
    (``core.play.episode.episode_trailer``: rewards per step, the observation that ended it) is folded in."""
    messages = json.loads(transcript) if isinstance(transcript, str) else list(transcript or [])
    out, pending, rewards, final = [], None, [], ""
    for m in messages:
        role, content = m.get("role"), str(m.get("content", ""))
        if role == "user":
            if pending is not None:
                out.append(Turn(pending, ""))
            pending = content
        elif role == "assistant":
            out.append(Turn(pending or "", content))
            pending = None
        elif role == "environment":
            rewards, final = json.loads(m.get("rewards") or "[]"), content
    if pending is not None:
        out.append(Turn(pending, ""))
    acted = [k for k, t in enumerate(out) if t.action]
    for k, r in zip(acted, rewards):
        out[k] = Turn(out[k].observation, out[k].action, float(r))
    if final:
        out.append(Turn(final, ""))
    return out


def load(conn, target: str, solver: str | None = None, seed: int | None = None,
         round_: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(environments rows, episodes rows) for ``target``: an environment id, or a pair ``author|solver``
    (every round unless ``round_``).

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
    if round_ is not None:
        where, params = where + " AND round = ?", [*params, round_]
    eps = conn.execute(f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE {where} "
                       "ORDER BY round, env_id, solver, seed, condition", params).df()
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
    reason = f", {STOP_WORDS.get(ep.stop_reason, ep.stop_reason)}" if isinstance(ep.stop_reason, str) else ""
    err = getattr(ep, "error", None)
    error = f" ({err})" if isinstance(err, str) and err else ""
    return f"{ep.status}{reason}, {plural(int(ep.turns or 0), 'turn')}{error}"


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
    if turn.reward is not None:
        lines.append(f"rew: {turn.reward:g}")
    return lines


def anchor(env_id: str, seed: int) -> str:
    """The id of an (environment, seed) transcript on a pair's page (links from the index and the report)."""
    return "ep-" + re.sub(r"[^A-Za-z0-9_.-]", "_", f"{env_id}-s{seed}")


def summary_rows(eps: pd.DataFrame) -> list[dict]:
    """One row per episode, in page order: round, environment, seed, condition, outcome, turns, final reward."""
    rows = []
    for env_id, solver, seed, cold, hinted in matched(eps):
        for ep in (cold, hinted):
            if ep is None:
                continue
            reward = float(ep.final_reward) if pd.notna(ep.final_reward) else None
            rows.append({"round": int(ep.round), "env_id": env_id, "solver": solver, "seed": seed,
                         "condition": ep.condition, "status": ep.status,
                         "stop": STOP_WORDS.get(ep.stop_reason, str(ep.stop_reason)), "turns": int(ep.turns or 0),
                         "reward": reward, "anchor": anchor(env_id, seed)})
    return rows


def summary_text(eps: pd.DataFrame) -> str:
    """A table of every episode (one line each) and the tally of outcomes per condition."""
    rows = summary_rows(eps)
    head = ("round", "environment", "solver", "seed", "condition", "outcome", "stop", "turns", "reward")
    table = [head] + [(str(r["round"]), r["env_id"], r["solver"], str(r["seed"]), r["condition"], r["status"],
                       r["stop"], str(r["turns"]), "n/a" if r["reward"] is None else f"{r['reward']:g}")
                      for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    tally = []
    for cond in ("cold", "hinted"):
        of = [r for r in rows if r["condition"] == cond]
        wins = sum(r["status"] == "success" for r in of)
        tally.append(f"{cond} {wins}/{len(of)} successes")
    envs = len({r["env_id"] for r in rows})
    lines.append(f"{plural(len(rows), 'episode')} of {plural(envs, 'environment')}: {', '.join(tally)}")
    return "\n".join(lines)


def _turns_html(ep) -> str:
    if ep is None:
        return "<p><em>not played</em></p>"
    items = []
    for k, t in enumerate(turns(ep.transcript), 1):
        final = not t.action and k > 1
        label = "final observation" if final else f"turn {k}"
        reward = f' <span class="reward">reward {t.reward:g}</span>' if t.reward is not None else ""
        items.append(f'<div class="turn{" final" if final else ""}"><div class="n">{label}</div>'
                     f'<pre class="obs">{escape(t.observation)}</pre>'
                     + (f'<pre class="act">{escape(t.action)}</pre><div class="n">{reward}</div>' if t.action else "")
                     + "</div>")
    return "".join(items)


STYLE = ("body{font-family:sans-serif;margin:20px;max-width:1500px} table{border-collapse:collapse} "
         "table.pair{width:100%;table-layout:fixed} td,th{vertical-align:top;border:1px solid #ccc;padding:4px 6px;"
         "font-size:13px;text-align:left} pre{white-space:pre-wrap;margin:2px 0;font-size:12px} .act{background:"
         "#eef4fb} .obs{background:#f7f7f7} .final .obs{background:#fff3d6} .n{color:#555;font-size:11px} .reward"
         "{font-weight:bold} .hint{background:#fff8e0;padding:6px} tr.success td.outcome,th.success{background:"
         "#dff3e3} tr.failure td.outcome,th.failure{background:#fbe0dd} tr.incomplete td.outcome,th.incomplete"
         "{background:#eee} details{margin:6px 0;border:1px solid #ddd;padding:4px 8px} summary{cursor:pointer;"
         "font-weight:bold} .transcript:target{outline:3px solid #3572b0}")


def episodes_html(title: str, envs: pd.DataFrame, eps: pd.DataFrame, back: str = "") -> str:
    """One self-contained page (no script): an index of every episode (environment, seed, condition, outcome,
    turns, reward; coloured by outcome) linking to its transcript, then per environment and seed a collapsible
    transcript with cold and hinted side by side, the reward of each step and the final observation."""
    hints = dict(zip(envs["env_id"], envs["hint"]))
    rows = summary_rows(eps)
    index = "".join(
        f'<tr class="{escape(r["status"])}" data-env="{escape(r["env_id"])}" data-seed="{r["seed"]}" '
        f'data-condition="{escape(r["condition"])}"><td>{r["round"]}</td><td>{escape(r["env_id"])}</td>'
        f'<td>{r["seed"]}</td><td>{escape(r["condition"])}</td><td class="outcome">{escape(r["status"])}</td>'
        f'<td>{escape(r["stop"])}</td><td>{r["turns"]}</td>'
        f'<td>{"n/a" if r["reward"] is None else format(r["reward"], "g")}</td>'
        f'<td><a class="transcript" href="#{r["anchor"]}">transcript</a></td></tr>' for r in rows)
    wins = {c: (sum(r["status"] == "success" for r in rows if r["condition"] == c),
                sum(r["condition"] == c for r in rows)) for c in ("cold", "hinted")}
    body = [f"<h1>{escape(title)}</h1>", f'<p><a href="{escape(back)}">back to the report</a></p>' if back else "",
            f'<p>{plural(len(rows), "episode")}: cold {wins["cold"][0]}/{wins["cold"][1]} successes, hinted '
            f'{wins["hinted"][0]}/{wins["hinted"][1]}. Green: success, red: failure, grey: incomplete (not '
            "counted). Each row opens its transcript.</p>",
            '<table id="index" class="index"><thead><tr><th>round</th><th>environment</th><th>seed</th><th>condition'
            "</th><th>outcome</th><th>stop</th><th>turns</th><th>final reward</th><th></th></tr></thead>"
            f"<tbody>{index}</tbody></table>"]
    for env_id, solver, seed, cold, hinted in matched(eps):
        c, h = (e.status if e is not None else "incomplete" for e in (cold, hinted))
        # the anchor is inside the collapsed part: following a link to it opens the <details> (no script needed)
        body.append(f'<details class="episode" data-env="{escape(env_id)}" data-solver="{escape(solver)}" '
                    f'data-seed="{seed}"><summary>{escape(env_id)}, seed {seed}: cold {escape(c)}, hinted '
                    f'{escape(h)}</summary><div class="transcript" id="{anchor(env_id, seed)}">'
                    f'<p class="hint"><b>hint (hinted side):</b> {escape(str(hints.get(env_id) or "(none)"))}</p>'
                    f'<table class="pair"><tr><th class="{escape(c)}">cold: {escape(_outcome(cold))}</th>'
                    f'<th class="{escape(h)}">hinted: {escape(_outcome(hinted))}</th></tr><tr><td class="cold">'
                    f'{_turns_html(cold)}</td><td class="hinted">{_turns_html(hinted)}</td></tr></table></div>'
                    "</details>")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<style>{STYLE}</style></head><body>{"".join(body)}</body></html>')
