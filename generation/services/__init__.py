"""Generation's services, one module per responsibility (import the module you need; nothing is re-exported here).

    prompts.py   what a condition sends and whether it can: rendering, set-up checks, quality flags, examples,
                 estimates (sends nothing)
    running.py   one item: claim, call, store exactly once; the one retry policy and loop every caller shares
    dispatch.py  start, cancel, retry, sweep; handing work to Celery or to in-process threads
    review.py    approve, edit, regenerate a response
    connection.py  a provider's Test connection (one cheap call and what to check) and its own list of models
    conditions.py  an LLM condition added and configured in one step
    judging.py   an LLM judge: rubric, reading replies, enqueue, rate one (claim, call, store once), screening

Reads live in generation.selectors. Arrows point one way: review → dispatch → running → prompts → selectors;
judging → dispatch → running; generation.tasks, generation.batches, generation.judge_batches and
generation.questionnaire sit above them; none of these imports tasks.
"""
