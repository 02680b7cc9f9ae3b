"""Query every panel of capstan's Grafana dashboards against a Prometheus.

Usage: dashboard_panels.py DASHBOARD_DIR PROMETHEUS_URL [--expect-empty TITLE | --only TITLE]...

Reads the dashboards `capstan observability dashboards --out` wrote, fills
in Grafana's variables the way a stock Grafana does for "All" (the
dashboards' allValue is ".*"), runs each panel's queries through
Prometheus' HTTP API and prints one line per panel: the number of series
each query returned. A panel has data when any of its queries returns a
series. Exits 1 when a panel has no data (or, for a title given with
--expect-empty, when it has some: those panels show a state the caller has
not set up yet, and the caller checks them later), or when Prometheus
refuses a query. --only TITLE checks just the panels named.
"""
import glob
import json
import os
import sys
import urllib.parse
import urllib.request

# Grafana's built-in variables, sized for a Prometheus scraping every
# second: $__rate_interval is at least four scrape intervals.
VARIABLES = {
    "$__rate_interval": "30s",
    "$__interval": "5s",
    "$__range": "1h",
    "$endpoint": ".*",
    "$cluster": ".*",
    "$plan": ".*",
}


def panels(dashboard):
    for p in dashboard.get("panels", []):
        yield from p.get("panels", [])
        if p.get("targets"):
            yield p


def query(prom, expr):
    url = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body.get('error')}")
    return len(body["data"]["result"])


def main(argv):
    out_dir, prom = argv[1], argv[2].rstrip("/")
    flags = {"--expect-empty": set(), "--only": set()}
    args = argv[3:]
    while args:
        if args[0] not in flags or len(args) < 2:
            sys.exit(f"usage: {__doc__.splitlines()[2]}")
        flags[args[0]].add(args[1])
        args = args[2:]
    expect_empty, only = flags["--expect-empty"], flags["--only"]

    files = sorted(glob.glob(os.path.join(out_dir, "dashboards", "*.json")))
    if not files:
        sys.exit(f"no dashboards under {out_dir}/dashboards")
    bad, seen = [], set()
    for f in files:
        dash = json.load(open(f))
        for p in panels(dash):
            title = p["title"]
            seen.add(title)
            if only and title not in only:
                continue
            counts = []
            for t in p["targets"]:
                expr = t["expr"]
                for k in sorted(VARIABLES, key=len, reverse=True):
                    expr = expr.replace(k, VARIABLES[k])
                try:
                    counts.append(query(prom, expr))
                except Exception as e:  # a refused query fails the panel
                    bad.append(f"{dash['uid']} / {title}: {e}")
                    counts.append(0)
            has = any(counts)
            want = title not in expect_empty
            mark = "ok" if has == want else "FAIL"
            print(f"{mark:4} {dash['uid']} / {title}: series per query {counts}")
            if has != want:
                bad.append(f"{dash['uid']} / {title}: " + ("no data" if want else "data, expected none yet"))
    unknown = (expect_empty | only) - seen
    if unknown:
        bad.append(f"no panel titled {sorted(unknown)}")
    if bad:
        print("\n".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
