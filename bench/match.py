"""Benchmark: the follow index (``core.follows.match.Matcher``) at 10 thousand to 1 million follows.

The papers are the 1,504 versions of the recorded rss.arxiv.org day (``tests/corpus/arxiv-rss``, 28 Nov 2024,
all 20 archives). The follows are generated (seeded, so every run sees the same ones) from that day's real
categories, author names and title words, drawn in proportion to how often they occur, so popular choices
repeat the way they do among real users (many people follow ``cat:cs.LG``):

* ~35% a single category: ``cat:cs.LG`` (one in ten a whole archive, ``cat:cs.*``);
* ~25% a single author: ``au:"Zeng Li"``, ``au:"Z. Li"``, ``au:Li`` or ``au:"Li, Zeng"``;
* ~20% a keyword or phrase: ``diffusion``, ``ti:diffusion``, ``abs:diffusion``, ``"language models"``;
* ~15% a category AND a keyword or phrase, taken from one paper of that category
  (``cat:cs.CL "language models"``);
* ~5% boolean queries with OR, ANDNOT and NOT, e.g. ``(graph OR network) cat:cs.LG``,
  ``au:"A B" OR au:"C D"``, ``quantum ANDNOT cat:quant-ph``.

Every word and name comes from the same day's titles and authors, so the follows are hot: far more of them
match each version than real follows would (most real keywords and authors are absent on a given day).
Queries without any positive term (``NOT cat:cs.CV``) are left out: each distinct one is evaluated for every
paper, they are rare, and ``tests/test_match*.py`` cover them. Each size is a prefix of the next, follow ids
are 1..N, and every distinct query text is parsed once with ``core.follows.query.parse``.

Reported per size, all in one run; times are CPU seconds of this process, as the machine is shared:

* build: ``Matcher(follows)``; memory (tracemalloc, in a second build followed by one matching pass, which
  adds the follow-id tuples the index hands out): what the index holds besides the parsed queries, what one
  parsed copy of each distinct query takes (the index keeps them alive), and the peak;
* ``Matcher.match_groups`` over all 1,504 versions, median and best of ``--repeat`` runs: one group per
  distinct matching query. Each version's ``PaperText`` is built once, up front, and shared by every size;
  that time is reported on its own. Versions per second, and time per version against the smallest size;
* ``Matcher.match`` over the same versions: one ``(follow_id, reasons)`` pair per matching follow;
* plain: ``Query.evaluate`` on every follow, for an evenly spread sample of the versions (the whole day would
  take half an hour at 1 million follows), extrapolated to 1,504 versions; its results are checked against
  the matcher's on that sample.

With ``--cold``, one more row: the largest size again, with the smallest size's follows and cold ones for
the rest (the same shapes and categories, but words and surnames that occur in no paper, as most real
keywords and authors on a given day): what the index costs when follows grow but matches do not.

With ``--peers``, it compares instead ``Matcher.match_groups`` with two search engines matching the same
distinct follows against the same day (``bench/peers.py``: tantivy and SQLite FTS5, one query per distinct
follow over an index of the day), in interleaved rounds, by CPU time: ``pip install 'papertrail[bench]'``.

Usage: python bench/match.py [--sizes 10000,100000,1000000] [--repeat 3] [--cold]
       python bench/match.py --peers [--sizes 10000,100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import bisect
import functools
import gc
import itertools
import random
import resource
import statistics
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.follows.match import Matcher  # noqa: E402
from core.follows.normalise import words  # noqa: E402
from core.follows.query import PaperText, Query, QueryError, parse  # noqa: E402
from core.values import PaperIn  # noqa: E402
from ingest.arxiv_rss_parse import parse_feed  # noqa: E402

_Q = TypeVar("_Q")
SIZES = "10000,100000,1000000"
FEED = ROOT / "tests" / "corpus" / "arxiv-rss" / "aioarxiv_rss_mock_feed.xml"

# Function words nobody follows on their own; they still occur inside phrases taken from titles.
STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "based", "be", "by", "for", "from", "in", "into", "is", "it",
        "its", "new", "of", "on", "or", "our", "the", "their", "this", "to", "toward", "towards", "using",
        "via", "we", "with", "without",
    }
)  # fmt: skip


class Weighted:
    """Draw items in proportion to their counts."""

    def __init__(self, counts: Counter[str]) -> None:
        self.items = sorted(counts)
        self.cumulative = list(itertools.accumulate(counts[i] for i in self.items))

    def draw(self, rng: random.Random) -> str:
        """One item, by weight."""
        return self.items[bisect.bisect_right(self.cumulative, rng.random() * self.cumulative[-1])]


class FollowGenerator:
    """Query texts built from one day's categories, authors and title words, in realistic proportions."""

    def __init__(self, papers: Sequence[PaperIn], seed: int = 4, *, cold: bool = False) -> None:
        """``cold``: every word and surname gets a suffix, so that no keyword or author follow matches."""
        self.rng = random.Random(seed)
        self.papers = papers
        self.categories = Weighted(Counter(c for p in papers for c in p.categories))
        self.archives = Weighted(Counter(c.split(".")[0] for p in papers for c in p.categories if "." in c))
        suffix = "qx" if cold else ""
        self.names = Weighted(
            Counter(a + suffix for p in papers for a in p.authors if not any(q in a for q in '"“”„()'))
        )
        self.title_words: list[list[str]] = []
        self.bigrams: list[list[str]] = []
        word_counts: Counter[str] = Counter()
        bigram_counts: Counter[str] = Counter()
        for p in papers:
            ws = words(p.title)
            keep = [w + suffix for w in ws if w not in STOPWORDS and len(w) > 2 and not w.isdigit()]
            pairs = [
                f"{a}{suffix} {b}{suffix}"
                for a, b in itertools.pairwise(ws)
                if a not in STOPWORDS and b not in STOPWORDS
            ]
            self.title_words.append(keep)
            self.bigrams.append(pairs)
            word_counts.update(set(keep))
            bigram_counts.update(set(pairs))
        self.words = Weighted(word_counts)
        self.phrases = Weighted(bigram_counts)

    def author(self) -> str:
        """``au:`` in one of the forms people type."""
        name = self.names.draw(self.rng)
        parts = name.split()
        form = self.rng.random()
        if len(parts) < 2 or form < 0.6:
            return f'au:"{name}"'
        if form < 0.85:
            return 'au:"' + " ".join(f"{p[0]}." for p in parts[:-1]) + f' {parts[-1]}"'
        if form < 0.95:
            return f"au:{parts[-1]}"
        return f'au:"{parts[-1]}, {" ".join(parts[:-1])}"'

    def keyword(self) -> str:
        """A word or phrase, sometimes restricted to the title or the abstract."""
        form = self.rng.random()
        if form < 0.55:
            return self.words.draw(self.rng)
        if form < 0.70:
            return f"ti:{self.words.draw(self.rng)}"
        if form < 0.75:
            return f"abs:{self.words.draw(self.rng)}"
        if form < 0.95:
            return f'"{self.phrases.draw(self.rng)}"'
        return f'ti:"{self.phrases.draw(self.rng)}"'

    def topical(self) -> tuple[str, str]:
        """A category and a word or phrase that go together: both from one paper."""
        while True:
            i = self.rng.randrange(len(self.papers))
            p, ws, pairs = self.papers[i], self.title_words[i], self.bigrams[i]
            if ws:
                break
        term = f'"{self.rng.choice(pairs)}"' if pairs and self.rng.random() < 0.3 else self.rng.choice(ws)
        return f"cat:{p.categories[0]}", term

    def boolean(self) -> str:
        """One of a few common shapes with OR, ANDNOT and NOT."""
        r = self.rng
        shape = r.randrange(6)
        if shape == 0:
            return f"({self.words.draw(r)} OR {self.words.draw(r)}) cat:{self.categories.draw(r)}"
        if shape == 1:
            return f"{self.words.draw(r)} ANDNOT cat:{self.categories.draw(r)}"
        if shape == 2:
            return f"{self.author()} OR {self.author()}"
        if shape == 3:
            return f"cat:{self.categories.draw(r)} OR cat:{self.categories.draw(r)}"
        if shape == 4:
            category, term = self.topical()
            return f"{category} NOT ti:{self.words.draw(r)} {term}"
        return f'("{self.phrases.draw(r)}" OR {self.words.draw(r)}) AND NOT cat:{self.categories.draw(r)}'

    def text(self) -> str:
        """One follow's query text."""
        kind = self.rng.random()
        if kind < 0.35:
            if self.rng.random() < 0.1:
                return f"cat:{self.archives.draw(self.rng)}.*"
            return f"cat:{self.categories.draw(self.rng)}"
        if kind < 0.60:
            return self.author()
        if kind < 0.80:
            return self.keyword()
        if kind < 0.95:
            category, term = self.topical()
            return f"{category} {term}" if self.rng.random() < 0.5 else f"{category} AND {term}"
        return self.boolean()


def generate(papers: Sequence[PaperIn], n: int, *, hot: int | None = None) -> list[str]:
    """``n`` query texts that all parse; the first ``k`` are the same for every ``n >= k``.

    With ``hot``, only the first ``hot`` texts are of the usual kind and the others are cold: same shapes,
    same categories, but words and surnames that occur in no paper.
    """
    generators = [FollowGenerator(papers), FollowGenerator(papers, cold=True)]
    valid: dict[str, bool] = {}
    texts: list[str] = []
    while len(texts) < n:
        text = generators[hot is not None and len(texts) >= hot].text()
        if text not in valid:
            try:
                parse(text)
                valid[text] = True
            except QueryError:
                valid[text] = False
        if valid[text]:
            texts.append(text)
    return texts


def cpu(fn: Callable[[], object]) -> float:
    """CPU seconds of this process spent in ``fn`` (the machine is shared: wall time includes waiting)."""
    start = time.process_time()
    fn()
    return time.process_time() - start


def each(fn: Callable[[PaperText], object], paper_texts: list[PaperText]) -> None:
    """Call ``fn`` on every version, keeping no result."""
    for t in paper_texts:
        fn(t)


def median_cpu(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median and least CPU seconds of ``fn`` over ``repeat`` runs, each after a full garbage collection."""
    times = []
    for _ in range(repeat):
        gc.collect()
        times.append(cpu(fn))
    return statistics.median(times), min(times)


def traced(fn: Callable[[], object]) -> tuple[object, int, int]:
    """Run ``fn`` under tracemalloc; return its result, the bytes it left allocated and its peak."""
    gc.collect()
    tracemalloc.start()
    before, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    result = fn()
    after, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, after - before, peak - before


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=SIZES, help="comma-separated follow counts")
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing (median reported)")
    parser.add_argument(
        "--plain-budget",
        type=int,
        default=3_000_000,
        help="query evaluations for the plain evaluator per size (sets how many versions it samples)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="also the largest size with only the smallest size's follows hot, the others cold",
    )
    parser.add_argument(
        "--peers",
        action="store_true",
        help="compare match_groups with tantivy and SQLite FTS5 in rounds (sizes default 10000,100000)",
    )
    args = parser.parse_args()
    if args.peers:
        sizes = sorted(int(s) for s in args.sizes.split(",")) if args.sizes != SIZES else [10_000, 100_000]
        peers(sizes, max(args.repeat, 5) if args.repeat == 3 else args.repeat)
        return
    sizes = sorted(int(s) for s in args.sizes.split(","))

    papers = parse_feed(FEED.read_bytes()).items
    paper_texts: list[PaperText] = []
    text_cpu = cpu(lambda: paper_texts.extend(PaperText.of(p) for p in papers))
    print(f"{len(papers):,} versions; PaperText.of for all of them: {text_cpu:.2f} s CPU (once, shared)")

    texts = generate(papers, sizes[-1])
    parsed: dict[str, Query] = {}
    parse_cpu = cpu(lambda: parsed.update((t, parse(t)) for t in dict.fromkeys(texts)))
    print(f"{len(texts):,} follows, {len(parsed):,} distinct texts parsed in {parse_cpu:.1f} s CPU")

    rows = [
        (f"{n:,}", measure([(i, parsed[t]) for i, t in enumerate(texts[:n], start=1)], paper_texts, args))
        for n in sizes
    ]
    if args.cold:
        # The hot follows are the same as in the smallest size; the cold ones match nothing but categories.
        mixed = generate(papers, sizes[-1], hot=sizes[0])
        parsed.update((t, parse(t)) for t in dict.fromkeys(mixed) if t not in parsed)
        follows = [(i, parsed[t]) for i, t in enumerate(mixed, start=1)]
        label = f"{sizes[-1]:,} ({sizes[-1] - sizes[0]:,} cold)"
        rows.append((label, measure(follows, paper_texts, args)))
    print(f"process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:,.0f} MiB")
    print()
    print(table(rows, len(paper_texts)))


def measure(
    follows: list[tuple[int, Query]], paper_texts: list[PaperText], args: argparse.Namespace
) -> dict[str, float]:
    """Build, size and time the index over ``follows``; time the plain evaluator on a sample of versions."""
    n = len(follows)
    gc.collect()
    built: list[Matcher] = []
    build = cpu(lambda: built.append(Matcher(follows)))
    matcher = built[0]

    def build_and_match() -> Matcher:
        # Matching builds the follow-id tuples it hands out (once per query): they belong to the index.
        index = Matcher(follows)
        for t in paper_texts:
            index.match_groups(t)
        return index

    _, index_bytes, build_peak = traced(build_and_match)
    # The distinct queries live as long as the index does: count each once, as parse builds it.
    distinct = {query.canonical() for _, query in follows}
    _, query_bytes, _ = traced(lambda: [parse(text) for text in distinct])

    # Each version's result is dropped before the next, as a matching pass that writes them out would.
    groups_cpu, groups_best = median_cpu(lambda: each(matcher.match_groups, paper_texts), args.repeat)
    # One pair per matching follow: tens of millions at a million follows, so fewer runs.
    pairs_cpu, _ = median_cpu(lambda: each(matcher.match, paper_texts), max(1, args.repeat // 2))
    groups = candidates = matches = 0
    for t in paper_texts:
        found = matcher.match_groups(t)
        groups += len(found)
        candidates += matcher.last_candidates
        matches += sum(len(ids) for ids, _ in found)

    sample_size = max(2, min(len(paper_texts), args.plain_budget // n))
    step = len(paper_texts) / sample_size
    sample = [paper_texts[int(k * step)] for k in range(sample_size)]
    plain_results: list[list[tuple[int, tuple[str, ...]]]] = []
    plain_cpu = cpu(
        lambda: plain_results.extend(
            [(fid, r) for fid, q in follows if (r := q.evaluate(t)) is not None] for t in sample
        )
    )
    for t, expected in zip(sample, plain_results, strict=True):
        assert matcher.match(t) == expected, f"index and plain evaluation differ on {t.arxiv_id}"
    plain_day = plain_cpu / sample_size * len(paper_texts)

    row = {
        "follows": n,
        "distinct": matcher.distinct_queries,
        "atoms": matcher.distinct_atoms,
        "build": build,
        "index_mib": index_bytes / 2**20,
        "queries_mib": query_bytes / 2**20,
        "peak_mib": build_peak / 2**20,
        "groups_s": groups_cpu,
        "groups_best": groups_best,
        "pairs_s": pairs_cpu,
        "groups": groups,
        "candidates": candidates,
        "matches": matches,
        "plain_s": plain_day,
        "plain_sample": sample_size,
    }
    print(
        f"{n:>9,} follows: {matcher.distinct_queries:,} distinct queries, {matcher.distinct_atoms:,} atoms; "
        f"build {build:.2f} s; index {row['index_mib']:.0f} MiB + {row['queries_mib']:.0f} MiB of queries "
        f"(peak {row['peak_mib']:.0f} MiB); match_groups {groups_cpu:.2f} s (best of "
        f"{args.repeat} {groups_best:.2f} s), match {pairs_cpu:.2f} s; "
        f"{candidates:,} candidates, {groups:,} groups, {matches:,} matches; "
        f"plain evaluator {plain_day:,.0f} s (from {sample_size} versions)",
        flush=True,
    )
    return row


def _each_query(match: Callable[[_Q], object], queries: list[_Q]) -> None:
    """Run every compiled query of a peer, keeping no result."""
    for q in queries:
        match(q)


def peers(sizes: list[int], rounds: int) -> None:
    """``match_groups`` against tantivy and FTS5 on the hot mix of each size: CPU seconds for the day.

    Each engine answers for the same distinct follows: the matcher by matching every version of the day
    against its index of follows, a peer by running one query per distinct follow against its index of the
    day. Building the indexes (the matcher's of follows, the peers' of papers and their compiled queries) is
    not timed, as neither is redone per day by a long-lived process; FTS5 parses its MATCH text per query,
    which is part of its time. The three run in turn, in a rotating order, ``rounds`` times; each time is
    the CPU time of this process, so tantivy's own threads count too.
    """
    from bench.peers import Fts5, Tantivy

    papers = parse_feed(FEED.read_bytes()).items
    paper_texts = [PaperText.of(p) for p in papers]
    texts = generate(papers, sizes[-1])
    parsed = {t: parse(t) for t in dict.fromkeys(texts)}
    start = time.process_time()
    tantivy_day, fts_day = Tantivy(papers), Fts5(papers)
    built = time.process_time() - start
    print(f"{len(papers):,} versions; tantivy and FTS5 indexes of the day built in {built:.2f} s CPU")
    lines = [
        "| follows | distinct queries | match_groups | tantivy | FTS5 | match_groups / tantivy "
        "| match_groups / FTS5 | (query, paper) pairs: PaperTrail, tantivy, FTS5, in all three |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for n in sizes:
        follows = [(i, parsed[t]) for i, t in enumerate(texts[:n], start=1)]
        matcher = Matcher(follows)
        distinct = list(dict.fromkeys(q for _, q in follows))
        compiled_tantivy = [tantivy_day.compile(q) for q in distinct]
        compiled_fts = [fts_day.compile(q) for q in distinct]

        runs: dict[str, Callable[[], object]] = {
            "match_groups": functools.partial(each, matcher.match_groups, paper_texts),
            "tantivy": functools.partial(_each_query, tantivy_day.match, compiled_tantivy),
            "fts5": functools.partial(_each_query, fts_day.match, compiled_fts),
        }
        times: dict[str, list[float]] = {name: [] for name in runs}
        names = list(runs)
        for r in range(rounds):
            for name in names[r % 3 :] + names[: r % 3]:
                gc.collect()
                times[name].append(cpu(runs[name]))
        ratios = {
            peer: statistics.median(m / p for m, p in zip(times["match_groups"], times[peer], strict=True))
            for peer in ("tantivy", "fts5")
        }
        medians = {name: statistics.median(ts) for name, ts in times.items()}

        # What each engine matched, as (distinct query, paper) pairs, to show how far the semantics agree.
        first_query = {fid: q for fid, q in follows}
        ours = {
            (first_query[ids[0]], k) for k, t in enumerate(paper_texts) for ids, _ in matcher.match_groups(t)
        }
        theirs_t = {
            (q, k) for q, c in zip(distinct, compiled_tantivy, strict=True) for k in tantivy_day.match(c)
        }
        theirs_f = {(q, k) for q, c in zip(distinct, compiled_fts, strict=True) for k in fts_day.match(c)}
        common = len(ours & theirs_t & theirs_f)
        print(
            f"{n:>9,} follows, {len(distinct):,} distinct: "
            + ", ".join(f"{name} {' '.join(f'{t:.2f}' for t in ts)}" for name, ts in times.items())
            + f"; match_groups/tantivy {ratios['tantivy']:.2f}, match_groups/fts5 {ratios['fts5']:.2f}"
            + f"; pairs {len(ours):,} / {len(theirs_t):,} / {len(theirs_f):,}, {common:,} in all",
            flush=True,
        )
        lines.append(
            f"| {n:,} | {len(distinct):,} | {medians['match_groups']:.2f} s | {medians['tantivy']:.2f} s "
            f"| {medians['fts5']:.2f} s | {ratios['tantivy']:.2f} × | {ratios['fts5']:.2f} × "
            f"| {len(ours):,}, {len(theirs_t):,}, {len(theirs_f):,}; {common:,} |"
        )
    print()
    print("\n".join(lines))


def table(rows: list[tuple[str, dict[str, float]]], versions: int) -> str:
    """The results as a Markdown table, for docs/benchmarks.md."""
    base = rows[0][1]["groups_s"] / versions
    lines = [
        "| follows | distinct queries | build | index memory (+ queries) | match_groups: 1,504 versions "
        "| versions/s | per version vs smallest | groups (distinct matches) | match: follow pairs "
        "| matches | plain evaluator (extrapolated) | plain / match_groups |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, r in rows:
        lines.append(
            f"| {label} | {r['distinct']:,.0f} | {r['build']:.2f} s "
            f"| {r['index_mib']:,.0f} MiB (+{r['queries_mib']:,.0f} MiB) "
            f"| {r['groups_s']:.2f} s (best {r['groups_best']:.2f} s) "
            f"| {versions / r['groups_s']:,.0f} | {r['groups_s'] / versions / base:.2f} × "
            f"| {r['groups']:,.0f} | {r['pairs_s']:.2f} s | {r['matches']:,.0f} "
            f"| {r['plain_s']:,.0f} s ({r['plain_sample']:.0f} versions) "
            f"| {r['plain_s'] / r['groups_s']:,.0f} × |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
