"""An allocation-heavy Python workload with a deterministic output.

Run it with and without LD_PRELOAD=libhakmem.so: stdout must be identical.
It builds dicts, strings, lists and sets, round-trips JSON, sorts, uses
regular expressions, and runs part of the work on threads whose results
(objects allocated in one thread) are consumed and freed by another.
Every printed value is independent of thread scheduling and of hash
randomisation.
"""

import collections
import hashlib
import json
import queue
import random
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def digest(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def make_words(rnd, n):
    return ["".join(rnd.choice(LETTERS[:12]) for _ in range(rnd.randint(1, 10))) for _ in range(n)]


def task(seed):
    """One unit of work: returns a dict allocated in the calling thread."""
    rnd = random.Random(seed)
    words = make_words(rnd, 12000)
    index = {}
    for i, w in enumerate(words):
        index.setdefault(w, []).append(i)
    counts = collections.Counter(words)
    records = [
        {"id": i, "name": w, "tags": sorted(set(w)), "score": (i * 7919) % 1000 / 7.0}
        for i, w in enumerate(words[:4000])
    ]
    text = json.dumps(records)
    back = json.loads(text)
    assert back == records
    ordered = sorted(back, key=lambda r: (-r["score"], r["name"], r["id"]))
    pieces = []
    for r in ordered[:2000]:
        pieces.append(f"{r['name']}:{r['id']}:{''.join(r['tags'])}")
    joined = "|".join(pieces)
    found = re.findall(r"([a-l]{3,})\:(\d+)", joined)
    upper = joined.upper().replace("|", "\n").splitlines()
    return {
        "seed": seed,
        "distinct": len(index),
        "top": counts.most_common(5),
        "longest": max(index, key=lambda w: (len(w), w)),
        "json_len": len(text),
        "found": len(found),
        "upper_tail": upper[-3:],
        "digest": digest(ordered[:500]),
        "payload": records,  # a large structure freed by the consumer
    }


def pipeline(n_items):
    """Producer threads allocate objects that a consumer thread frees."""
    q = queue.Queue(maxsize=64)
    totals = collections.Counter()
    lock = threading.Lock()

    def produce(pid):
        rnd = random.Random(1000 + pid)
        for i in range(n_items):
            blob = {"k": [rnd.random() for _ in range(20)], "s": "x" * (i % 300), "i": i}
            q.put((pid, blob))
        q.put((pid, None))

    def consume(n_producers):
        done = 0
        local = collections.Counter()
        while done < n_producers:
            pid, blob = q.get()
            if blob is None:
                done += 1
                continue
            local[pid] += len(blob["s"]) + int(sum(blob["k"]) * 1000)
            del blob
        with lock:
            totals.update(local)

    producers = [threading.Thread(target=produce, args=(p,)) for p in range(3)]
    consumer = threading.Thread(target=consume, args=(3,))
    consumer.start()
    for t in producers:
        t.start()
    for t in producers:
        t.join()
    consumer.join()
    return sorted(totals.items())


def main():
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(task, range(6)))
    for r in results:
        payload = r.pop("payload")
        print(json.dumps(r, sort_keys=True), len(payload))
        del payload
    print("pipeline", pipeline(4000))

    # Single-threaded churn: string building, dict resizing, big lists.
    d = {}
    for i in range(200000):
        d[f"key{i}"] = str(i) * (i % 7)
        if i % 3 == 0:
            del d[f"key{i // 2}"]
    print("dict", len(d), digest(sorted(d.items())[:1000]))
    big = list(range(1000000))
    random.Random(5).shuffle(big)
    big.sort()
    print("sorted", big[:3], big[-3:], sum(big))
    s = ""
    for i in range(20000):
        s += LETTERS[i % 26]
    print("string", len(s), hashlib.md5(s.encode()).hexdigest())
    b = bytearray()
    for i in range(1000):
        b.extend(bytes([i % 256]) * 1000)
    print("bytes", len(b), hashlib.sha1(b).hexdigest())
    sys.stdout.flush()


if __name__ == "__main__":
    main()
