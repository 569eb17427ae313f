"""The official openai client against a running `tandem serve` of a GPT with a tokenizer.

openai_client.py BASE_URL (e.g. http://127.0.0.1:8081/v1). Starts nothing itself. Checks a
streamed completion (chunks as they come, finish_reason on the last, the same text as the
answer without stream), n=2 (choice i is the choice 0 of seed + i), stop, top_p, the fields the
client sends with their defaults, and a refused value. Exits non-zero on the first failure.
"""
import sys

import openai
from openai import OpenAI


def main(base_url):
    client = OpenAI(base_url=base_url, api_key="unused")
    model = "gpt-mini"
    prompt = "the quick brown"

    def create(**kw):
        args = dict(model=model, prompt=prompt, max_tokens=8, seed=3)
        args.update(kw)
        return client.completions.create(**args)

    whole = create()
    text = whole.choices[0].text
    assert whole.object == "text_completion" and whole.id.startswith("cmpl-"), whole
    assert whole.usage.completion_tokens == len(whole.choices[0].token_ids), whole.usage
    print(f"openai {openai.__version__}: completion {text!r} ({whole.choices[0].finish_reason})")

    chunks = list(create(stream=True))
    streamed = "".join(c.choices[0].text for c in chunks)
    assert len(chunks) == len(whole.choices[0].token_ids), (len(chunks), whole)
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1]), chunks
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason, chunks[-1]
    assert streamed == text, (streamed, text)
    print(f"stream: {len(chunks)} chunks, text {streamed!r}, last finish_reason "
          f"{chunks[-1].choices[0].finish_reason}")

    usage = list(create(stream=True, stream_options={"include_usage": True}))
    assert usage[-1].choices == [] and usage[-1].usage.completion_tokens == len(chunks), usage[-1]

    two = create(n=2, top_p=0.9)
    assert [c.index for c in two.choices] == [0, 1], two
    for i, c in enumerate(two.choices):
        one = create(top_p=0.9, seed=3 + i).choices[0]
        assert c.text == one.text, (i, c.text, one.text)
    print(f"n=2 top_p=0.9: {[c.text for c in two.choices]!r}")

    long = create(max_tokens=24).choices[0].text
    stop = long[len(long) // 2:len(long) // 2 + 2]
    cut = create(max_tokens=24, stop=[stop, "never"]).choices[0]
    assert cut.text == long[:long.find(stop)] and cut.finish_reason == "stop", (long, stop, cut)
    streamed_cut = "".join(c.choices[0].text for c in create(max_tokens=24, stop=stop, stream=True))
    assert streamed_cut == cut.text, (streamed_cut, cut.text)
    print(f"stop {stop!r}: {cut.text!r} (of {long!r})")

    same = create(echo=False, logprobs=None, presence_penalty=0, frequency_penalty=0, user="u",
                  best_of=1, logit_bias={}, suffix=None, extra_body={"top_k": 0})
    assert same.choices[0].text == text, same

    try:
        create(echo=True)
        raise AssertionError("echo=True was accepted")
    except openai.BadRequestError as e:
        assert "\"echo\" is true" in str(e), e
        print(f"echo=True: 400 {e.body['message'] if isinstance(e.body, dict) else e}")
    print("openai client: all checks passed")


if __name__ == "__main__":
    main(sys.argv[1])
