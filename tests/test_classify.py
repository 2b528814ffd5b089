"""The AI-related rule: categories, title and abstract cues, the traps it must not fall into, the counts on
the recorded corpus (docs/ai-related.md quotes them), and the word-gate shortcut against a plain scan."""

from __future__ import annotations

import re
from collections import Counter
from datetime import date
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.papers import classify
from core.papers.classify import AI_CATEGORIES, CUES, ai_category, ai_cue, ai_reason, is_ai_related
from core.values import PaperIn
from ingest.arxiv_rss_parse import parse_feed
from ingest.hf_daily_parse import parse_daily
from tests.conftest import BIG_FEED, CORPUS


@cache
def _feed() -> tuple[PaperIn, ...]:
    return tuple(parse_feed(BIG_FEED.read_bytes()).items)


def _kind(reason: str | None) -> str:
    """ "category cs.LG" -> "category", "title: LLM" -> "title", None -> "none"."""
    return "none" if reason is None else reason.split(":")[0].split(" ")[0]


# -- categories ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("category", sorted(AI_CATEGORIES))
def test_every_ai_category_counts_as_primary_or_cross_list(category: str) -> None:
    assert ai_reason([category]) == f"category {category}"
    assert ai_reason(["math.OC", category]) == f"category {category}"


def test_the_category_list_is_the_documented_one() -> None:
    assert sorted(AI_CATEGORIES) == sorted(
        ["cs.AI", "cs.LG", "cs.CL", "cs.CV", "cs.NE", "cs.IR", "cs.MA", "cs.RO", "stat.ML"]
    )


@pytest.mark.parametrize(
    "category", ["eess.AS", "eess.IV", "cs.SD", "q-bio.NC", "eess.SP", "cs.HC", "math.OC"]
)
def test_neighbouring_categories_alone_do_not_count(category: str) -> None:
    assert not is_ai_related([category], "Room acoustics", "We measure reverberation.")


def test_the_first_ai_category_is_the_reason() -> None:
    assert ai_reason(["math.OC", "cs.RO", "cs.LG"]) == "category cs.RO"
    assert ai_category(["hep-th"]) is None


def test_categories_alone_keep_the_old_signature() -> None:
    """Callers that pass only categories (any iterable, even a generator) still get an answer."""
    assert is_ai_related(["cs.LG"]) is True
    assert is_ai_related(("math.CO",)) is False
    assert is_ai_related(c for c in ["q-bio.NC", "cs.NE"]) is True


def test_a_category_wins_over_the_title_and_the_title_over_the_abstract() -> None:
    assert ai_reason(["cs.CL"], "Large Language Models", "A CNN.") == "category cs.CL"
    assert ai_reason(["math.NA"], "Large Language Models", "A CNN.") == "title: large language model"
    assert ai_reason(["math.NA"], "Fast solvers", "We train a CNN.") == "abstract: neural network"
    assert ai_reason(["math.NA"], "Fast solvers", "We prove a bound.") is None


# -- cues that count -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "reason"),
    [
        (
            "Automated Test Transfer Across Android Apps Using Large Language Models",
            "title: large language model",
        ),
        ("LLM-Powered Approximate Intermittent Computing", "title: LLM"),
        ("Measuring Emergent Capabilities of LLMs for Software Engineering", "title: LLM"),
        ("Guiding ChatGPT to Fix Web UI Tests", "title: GPT"),
        ("Evaluating GPT-4o on Olympiad Problems", "title: GPT"),
        ("Analysis of hidden-charm pentaquarks via deep learning", "title: deep learning"),
        ("A Deep-Learning Framework for Triangle Singularities", "title: deep learning"),
        ("Deep\nLearning, wrapped over two lines", "title: deep learning"),
        ("Machine-Learning based photon counting for PMT waveforms", "title: machine learning"),
        ("Explainable AI in 6G O-RAN", "title: AI"),
        ("An AI-Assisted Multi-Agent Dialogue System", "title: AI"),
        ("Dark Matter Axion Detection with Neural Networks", "title: neural network"),
        ("Physics Informed Neural Networks (PINNs) for PDEs", "title: physics-informed neural network"),
        ("Inverse Physics-Informed Neural Networks for transport", "title: physics-informed neural network"),
        ("Quantum noise modeling through Reinforcement Learning", "title: reinforcement learning"),
        (
            "Generative adversarial network for core-collapse gravitational waves",
            "title: generative adversarial network",
        ),
        ("A New GAN-based Transformer for Energy Theft Detection", "title: generative adversarial network"),
        (
            "Unfolding Detector Effects using Denoising Diffusion Probabilistic Models",
            "title: diffusion model",
        ),
        ("Watermarking Diffusion Models using CLWE", "title: diffusion model"),
        ("Convolutional Vision Transformer for Cosmology", "title: vision transformer"),
        ("Backdoor Attack against Customized Text-to-Image Models", "title: text-to-image"),
        ("An Auto-Encoder Based Approach to Block Codes", "title: autoencoder"),
        ("Self-Supervised Pretraining for Spectra", "title: self-supervised learning"),
        ("SelfSupervised spectra", "title: self-supervised learning"),
        ("Zero-Shot Classification of Light Curves", "title: zero-shot learning"),
        (
            "End-to-End Automatic Speech Recognition with Context Separation",
            "title: automatic speech recognition",
        ),
        ("Gradient-Boosted Trees for Jet Tagging", "title: gradient boosting"),
        ("Deep learning‐based x‐ray radiography", "title: deep learning"),  # U+2010 hyphens
    ],
)
def test_title_cues(title: str, reason: str) -> None:
    assert ai_reason(["physics.ins-det"], title) == reason


@pytest.mark.parametrize(
    ("abstract", "reason"),
    [
        ("The framework is based on a convolutional neural network.", "abstract: neural network"),
        (
            "We present a deep reinforcement learning (DRL)-based framework.",
            "abstract: reinforcement learning",
        ),
        (
            "A Bayesian tomography with physics-informed neural networks (PINN).",
            "abstract: physics-informed neural network",
        ),
        (
            "... and generative adversarial networks to study mergers.",
            "abstract: generative adversarial network",
        ),
        ("a Random Forest Classifier labels applications", "abstract: random forest"),
        ("We fine-tune pre-trained models on the task.", "abstract: pre-trained model"),
        ("Retrieval-augmented generation answers questions.", "abstract: retrieval-augmented generation"),
        ("LLMs write the seeds.", "abstract: LLM"),
    ],
)
def test_abstract_method_cues(abstract: str, reason: str) -> None:
    assert ai_reason(["cs.SE"], "A title without cues", abstract) == reason


@pytest.mark.parametrize(
    "abstract",
    [
        "Photonic switches could enable fabrics for artificial intelligence compute clusters.",
        "Rapidly evolving AI and machine learning applications require better chiplet cooling.",
        "We discuss waveforms, MIMO and the potential use of deep learning in 6G.",
        "The library can be incorporated into advanced machine-learning workflows.",
    ],
)
def test_field_names_in_an_abstract_do_not_count(abstract: str) -> None:
    """Measured: an abstract that only names the field is often motivation, not the paper's subject."""
    assert ai_cue("A title without cues", abstract) is None


def test_the_first_cue_in_the_list_is_the_reason() -> None:
    """ "large language model" is listed before "LLM" and "language model": the most specific label wins."""
    assert (
        ai_cue("LLM judges: large language models grading language models") == "title: large language model"
    )


# -- traps: what must not count ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "abstract"),
    [
        (
            "Thermal ageing of oil-immersed power transformers",
            "A transformer model of the distribution grid.",
        ),
        ("Transformer Winding Fault Diagnosis", "Frequency response of the transformer."),
        ("Perovskite solar cells", "Perovskites have attracted much attention as absorbers."),
        ("Attention deficit in adolescents", "Selective attention and working memory."),
        ("Active learning in undergraduate physics classrooms", "Online learning outcomes of students."),
        ("Learning Mean First Passage Time", "Learning outcomes; machine shop; deep inelastic scattering."),
        ("A drift-diffusion model for perovskite solar cells", "Uniqueness for the drift-diffusion model."),
        ("Reaction-diffusion models of pattern formation", "Advection-diffusion models in porous media."),
        ("The fine-tuning problem of the Higgs mass", "Naturalness and fine-tuning in supersymmetry."),
        ("GaN high-electron-mobility transistors", "Gallium nitride (GaN) and AlGaN barriers."),
        ("LoRa networks for smart farming", "LoRa gateways and LoRaWAN."),
        ("Maximum likelihood (ML) estimation of RL circuits", "ML estimates; RL and RC filters."),
        ("Nonlinear programming for NMPC", "The NLP is solved by interior point methods."),
        ("VLA observations of radio jets", "The Karl G. Jansky VLA."),
        ("Speech recognition in noise by hearing-impaired listeners", "Speech recognition thresholds."),
        ("Neural activity in the mouse cortex", "Neural circuits and neural tube defects."),
        ("Brane world models and shell cosmologies", "Settings such as brane world models."),
        ("Ordered random walks and the Airy line ensemble", "Random graphs; a forest of trees."),
        ("Representation theory of quivers", "A matrix representation of the resolvent."),
        ("The zero entropy locus for the Lozi maps", "A few shots of espresso; shot noise."),
        ("Remote Surgery: Knowledge Production and Diffusion", "The diffusion of innovations."),
        ("BRAIN imaging MAINTENANCE", "AIMS and FAIR data; PAIN and GAIN."),
        ("Nonnegative tensors", "a_neural_network in a file name"),
    ],
)
def test_traps(title: str, abstract: str) -> None:
    assert ai_cue(title, abstract) is None, ai_cue(title, abstract)


# -- the recorded corpus -------------------------------------------------------------------------------


def test_counts_on_the_recorded_arxiv_day() -> None:
    """rss.arxiv.org, 28 Nov 2024, 1,504 items: the numbers docs/ai-related.md reports."""
    papers = _feed()
    kinds = Counter(_kind(ai_reason(p.categories, p.title, p.abstract)) for p in papers)
    assert kinds == {"category": 550, "title": 55, "abstract": 17, "none": 882}
    old_rule = {"cs.AI", "cs.LG", "cs.CL", "cs.CV", "cs.NE", "cs.MA", "stat.ML"}
    assert sum(bool(old_rule & set(p.categories)) for p in papers) == 525  # before cs.IR and cs.RO
    stored = sum(is_ai_related(p.categories, p.title, p.abstract) for p in papers)
    assert stored == 550 + 55 + 17


def test_cue_only_hits_on_the_recorded_day_include_the_judged_ones() -> None:
    """A few of the cue-only papers read and judged in docs/ai-related.md, one per kind of cue."""
    reasons = {p.arxiv_id: ai_reason(p.categories, p.title, p.abstract) for p in _feed()}
    assert reasons["2411.17947"] == "title: neural network"  # hep-ex: axion detection with neural networks
    assert reasons["2411.17933"] == "title: large language model"  # cs.SE
    assert reasons["2411.17839"] == "abstract: reinforcement learning"  # cond-mat: deep RL framework
    assert reasons["2411.18327"] == "abstract: random forest"  # cs.CR: HPC application classification
    assert reasons["2411.18139"] is None  # physics.optics: "for AI compute clusters" is motivation only


def test_hugging_face_picks_are_mostly_found_by_cues_alone() -> None:
    """Hugging Face's daily papers are AI papers and carry no categories: how many the cues find."""
    picks = {}
    for path in sorted((CORPUS / "hf-daily").rglob("*.json")):
        try:
            day = date.fromisoformat(path.stem.removeprefix("daily_papers_"))
        except ValueError:
            continue
        for pick in parse_daily(path.read_bytes(), day).picks:
            picks[pick.arxiv_id] = pick
    assert len(picks) == 1341
    assert sum(ai_cue(p.title) is not None for p in picks.values()) == 542
    assert sum(ai_cue(p.title, p.summary) is not None for p in picks.values()) == 1128


# -- the gate shortcut gives what a plain scan gives ---------------------------------------------------


def _plain_scan(text: str, *, title: bool) -> str | None:
    """Every cue, in order, without the word gate: what _first_cue must answer."""
    for compiled in classify._COMPILED:
        if compiled.cue.title_only and not title:
            continue
        if classify._found(compiled, text):
            return compiled.cue.label
    return None


def test_the_gate_matches_a_plain_scan_on_the_recorded_day() -> None:
    for paper in _feed():
        for text, title in ((paper.title, True), (paper.abstract, False)):
            assert classify._first_cue(text, classify._candidates(text), title=title) == _plain_scan(
                text, title=title
            ), text


def _words() -> st.SearchStrategy[str]:
    """Words of the cues in their spellings, plus near misses and filler."""
    pieces = set()
    for cue in CUES:
        for part in re.split(r"[ ~|]", cue.spec.lstrip("-")):
            word = part.lstrip("*")
            pieces |= {word, word.capitalize(), word.upper(), word + "s", "x" + word}
    pieces |= {"the", "of", "a", "drift", "GaN", "LoRa", "é", "ö"}
    return st.sampled_from(sorted(pieces))


_SEPARATORS = st.sampled_from([" ", "  ", "-", "\n", "\u2010", "_", ".", ",", "(", "é", "’", ""])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_words(), _SEPARATORS), max_size=8), st.booleans())
def test_the_gate_matches_a_plain_scan_on_generated_text(parts: list[tuple[str, str]], title: bool) -> None:
    text = "".join(word + separator for word, separator in parts)
    assert classify._first_cue(text, classify._candidates(text), title=title) == _plain_scan(
        text, title=title
    )
