"""The backend's CPU samples grouped by subsystem (bench/profile.sh).

Reads one sample per line: its weight, a tab, then its frames innermost first, `;`-separated,
each `symbol (object)`. A sample belongs to the innermost frame that names a subsystem, so a
`send` in the kernel counts for whoever sent (the HTTP server, the database driver, the bank
call). Frames that name none (the kernel, libc, the allocator, the standard library, tokio,
futures, and wrappers such as tracing's `Instrumented` whose own frame stands for the future
they poll) are passed over; a sample with no subsystem at all is the runtime's. Prints each
group's share, how much of that share was spent in the kernel, and its top functions.
"""

import re
import sys
from collections import Counter, defaultdict

# (group, pattern on a frame's symbol), tried in order on each frame.
GROUPS = [
    ("wrapper", r"Instrumented<T> as core::future::future::Future"),
    ("database: sqlx and the store", r"\bsqlx|backend::store::"),
    ("bank call: HTTP client", r"\breqwest::|hyper_util::client|hyper::client|backend::bank_client"),
    ("tokens: JWT check", r"shared::auth|backend::identity|\bhmac::|\bring::|aws_lc|base64::"),
    ("fingerprint", r"shared::fingerprint|\bsha2::"),
    ("JSON", r"serde_json::|\bserde::"),
    ("metrics", r"backend::metrics|prometheus|request_metrics|metrics::"),
    ("tracing and logs", r"\btracing|opentelemetry"),
    ("audit trail queue", r"backend::trail"),
    ("reconciliation leases", r"leases"),
    ("replay cache", r"replay_cache"),
    ("ids: uuid and randomness", r"\buuid::|getrandom|\brand::"),
    ("HTTP server: hyper, axum, tower", r"\bhyper::|\baxum|\btower|hyper_util::server|\bhttp::|httparse|backend::http::"),
    ("the flows (claim, rounds, replies)", r"backend::flows|backend::domain|shared::"),
]
COMPILED = [(group, re.compile(pattern)) for group, pattern in GROUPS]
RUNTIME = "runtime and other (tokio, scheduling, unattributed)"


def group_of(frames):
    for frame in frames:
        symbol = frame.rsplit(" (", 1)[0]
        for group, pattern in COMPILED:
            if pattern.search(symbol):
                if group == "wrapper":
                    break
                return group
    return RUNTIME


def main(path):
    total = 0
    by_group = Counter()
    in_kernel = Counter()
    functions = defaultdict(Counter)
    with open(path) as samples:
        for line in samples:
            weight, _, stack = line.rstrip("\n").partition("\t")
            frames = stack.split(";")
            weight = int(weight)
            group = group_of(frames)
            total += weight
            by_group[group] += weight
            if "[kernel.kallsyms]" in frames[0]:
                in_kernel[group] += weight
            user_frames = [f for f in frames if "[kernel.kallsyms]" not in f]
            functions[group][(user_frames or frames)[0].rsplit(" (", 1)[0][:90]] += weight
    if not total:
        print("no samples")
        return
    print(f"{'subsystem':<52} {'share':>7} {'of it in kernel':>16}")
    for group, weight in by_group.most_common():
        kernel = in_kernel[group] / weight
        print(f"{group:<52} {weight / total:>7.1%} {kernel:>16.0%}")
    print("\ntop functions (innermost user-space frame) per subsystem:")
    for group, _ in by_group.most_common():
        print(f"  {group}")
        for function, weight in functions[group].most_common(4):
            print(f"    {weight / total:>6.1%}  {function}")


if __name__ == "__main__":
    main(sys.argv[1])
