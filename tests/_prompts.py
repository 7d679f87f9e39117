"""Fixed prompts shared by the model-tier tests, golden files and benches."""

COHERENCE_PROMPT = (
    "You will be given one summary written for a news article. Rate its coherence on a scale "
    "of 1 to 5, where 1 is the lowest and 5 is the highest.\n\nSummary:\n\n"
    "The cat sat on the mat. It was a sunny day, and the cat enjoyed the warmth.\n\n"
    "Evaluation Form (scores ONLY):\n\n- Coherence:"
)
TEN_PROMPT = (
    "Rate how well this answer solves the task on a scale of 0 to 10.\n\nTask: add 2 and 3.\n"
    "Answer: 5\n\nReply with the number only."
)
YESNO_PROMPT = "Is the following sentence grammatical? 'The cats sits on mat.' Answer Yes or No."

CASES = [
    {"id": "coherence-1-5", "prompt": COHERENCE_PROMPT, "labels": [1, 2, 3, 4, 5],
     "prefill": "Coherence (1-5):"},
    {"id": "quality-0-10", "prompt": TEN_PROMPT, "labels": list(range(11)), "prefill": "Score:"},
    {"id": "yes-no", "prompt": YESNO_PROMPT, "labels": ["Yes", "No"], "prefill": None},
]

# Short judging prompts for the OpenAI-compatible server tests (llama-server, llama_cpp.server).
SERVER_PROMPTS = [
    ("Rate the coherence of this summary from 1 to 5.\n\nSummary: The cat sat on the mat. "
     "It was happy."),
    "Rate the fluency of this text from 1 to 5.\n\nText: me go store yesterday buyed apple",
    ("Rate the relevance of this answer from 1 to 5.\n\nQuestion: What is the capital of "
     "France?\nAnswer: Paris is the capital of France."),
    "Rate the politeness of this reply from 1 to 5.\n\nReply: Whatever. Do it yourself.",
]
SERVER_PREFILL = "Score (1-5): "
