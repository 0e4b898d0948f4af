#!/usr/bin/env bash
# A real one-host Slurm cluster for `ember sweep --slurm`: starts a private munged and
# slurmctld + slurmd on this machine (Debian's slurm-wlm and munge, from scripts/setup.sh),
# runs a grid of 8 runs as a 4-task job array plus its afterok summary job through
# `ember sweep --slurm --submit`, waits for them (at most $EMBER_SLURM_TIMEOUT seconds each),
# and checks the cluster's summary and every extracted array against a local sweep of the
# same grid, bit for bit; then a 20-prompt dataset as 2 shards (a 2-task array) whose final
# job merges them, checked against a local unsharded run of the same config, every file
# byte for byte; then a 2-run [attribute] grid and a 3-sample [attribute] dataset as a 2-task
# array, collected by the summary job (run ids and prompt tokens read back from the
# manifests), against a local sweep of both, every file byte for byte and each manifest but
# for its run id and timing. Every daemon it started is stopped by its pid, and its
# directories removed, however it ends. Needs root (slurmd runs the jobs). Fails loudly,
# naming the log, where Slurm cannot start.
#
# The daemons' pid files live in $EMBER_SLURM_STATE (default /tmp/ember-test-slurm): a run
# killed before it could clean up leaves them there, and the next run stops those daemons
# first. Ports 16817/16818 are used, not Slurm's defaults, to stay clear of a real cluster.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ember=${EMBER:-"${EMBER_BUILD_DIR:-$root/build}/app/ember"}
fixtures=${EMBER_FIXTURES:-"$root/../shared/fixtures"}
model="$fixtures/models/stories260K.gguf"
state=${EMBER_SLURM_STATE:-/tmp/ember-test-slurm}
timeout=${EMBER_SLURM_TIMEOUT:-90}

fail() { echo "test-slurm: FAILED: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "must run as root (slurmd runs the jobs as their users; munged and Slurm's state here are root's)"
[ -x "$ember" ] || fail "$ember not found (build first, or set EMBER)"
[ -f "$model" ] || fail "$model not found (set EMBER_FIXTURES to the shared fixtures)"
for tool in munged munge slurmctld slurmd sbatch squeue sinfo scontrol; do
  command -v "$tool" > /dev/null || [ -x "/usr/sbin/$tool" ] || fail "$tool not found: run scripts/setup.sh (slurm-wlm, munge)"
done
export PATH="$PATH:/usr/sbin"

# One test cluster at a time on this machine.
exec 9> "$state.lock"
flock -w 120 9 || fail "another test-slurm.sh has held $state.lock for 2 minutes"

# Stops the daemon whose pid is in $1 if it is still the program $2 (ours, from this run
# or an earlier one that did not clean up): TERM, then KILL after 10 s.
stop_daemon() {
  local pidfile=$1 program=$2 pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile" 2> /dev/null || true)
  rm -f "$pidfile"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  [ "$(cat "/proc/$pid/comm" 2> /dev/null || true)" = "$program" ] || return 0
  # Its children too (slurmctld's slurmscriptd holds the controller's port for a while).
  local pids
  pids="$pid $(awk -v parent="$pid" '$4 == parent {print $1}' /proc/[0-9]*/stat 2> /dev/null | tr '\n' ' ' || true)"
  # shellcheck disable=SC2086
  kill $pids 2> /dev/null || true
  for _ in $(seq 1 100); do
    local alive=""
    for p in $pids; do kill -0 "$p" 2> /dev/null && alive="$alive $p"; done
    [ -z "$alive" ] && return 0
    sleep 0.1
  done
  echo "test-slurm: $program (pids$alive) did not stop on TERM; killing it" >&2
  # shellcheck disable=SC2086
  kill -9 $alive 2> /dev/null || true
}

# Whether something listens on TCP port $1 (read from /proc: no tool needed).
listening() {
  local hex
  hex=$(printf '%04X' "$1")
  awk -v port=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == port {found = 1} END {exit !found}' \
    /proc/net/tcp /proc/net/tcp6 2> /dev/null
}

# Cancels the jobs still on our cluster (so that slurmd ends their steps), then stops the daemons.
stop_all() {
  if [ -f "$state/slurm.conf" ] && [ -f "$state/slurmctld.pid" ] &&
    [ "$(cat "/proc/$(cat "$state/slurmctld.pid")/comm" 2> /dev/null || true)" = slurmctld ]; then
    local jobs
    jobs=$(SLURM_CONF="$state/slurm.conf" timeout 10 squeue -h -o %A 2> /dev/null | sort -u | tr '\n' ' ' || true)
    if [ -n "${jobs// /}" ]; then
      # shellcheck disable=SC2086
      SLURM_CONF="$state/slurm.conf" timeout 10 scancel $jobs 2> /dev/null || true
      for _ in $(seq 1 50); do
        [ -z "$(SLURM_CONF="$state/slurm.conf" timeout 10 squeue -h 2> /dev/null || true)" ] && break
        sleep 0.2
      done
    fi
  fi
  stop_daemon "$state/slurmd.pid" slurmd
  stop_daemon "$state/slurmctld.pid" slurmctld
  stop_daemon "$state/munge/munged.pid" munged
}

work=""
cleanup() {
  local status=$?
  stop_all
  rm -rf "$state"
  [ -z "$work" ] || rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Logs of whatever did not start, then the failure.
fail_with_logs() {
  for log in "$state"/munge/munged.log "$state"/slurmctld.log "$state"/slurmd.log; do
    [ -f "$log" ] && { echo "--- $log (last lines)" >&2; tail -n 20 "$log" >&2; }
  done
  fail "$*"
}

stop_all  # daemons left by an earlier run that was killed before its cleanup
stale=$(cat "$state/work" 2> /dev/null || true)
[[ "$stale" == /tmp/ember-test-slurm-work.* ]] && rm -rf "$stale"
rm -rf "$state"
mkdir -p "$state/munge" "$state/spool" "$state/state"
chmod 755 "$state" "$state/munge"  # munged wants every directory above its socket searchable
work=$(mktemp -d /tmp/ember-test-slurm-work.XXXXXX)
echo "$work" > "$state/work"
chmod 755 "$work"

echo "== munge (private key and socket)"
dd if=/dev/urandom of="$state/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$state/munge/munge.key"
socket="$state/munge/munge.socket"
# The daemons must not inherit the lock (fd 9): they may outlive this script.
munged --socket="$socket" --key-file="$state/munge/munge.key" --pid-file="$state/munge/munged.pid" \
  --log-file="$state/munge/munged.log" --seed-file="$state/munge/munged.seed" 9>&- ||
  fail_with_logs "munged did not start"
munge -n -S "$socket" | unmunge -S "$socket" > /dev/null || fail_with_logs "munge cannot encode and decode a credential"

echo "== slurmctld and slurmd"
host=$(hostname -s)
export SLURM_CONF="$state/slurm.conf"
cat > "$SLURM_CONF" <<EOF
ClusterName=embertest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SlurmUser=root
SlurmdUser=root
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd.log
SlurmdSpoolDir=$state/spool
StateSaveLocation=$state/state
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
for port in 16817 16818; do
  for _ in $(seq 1 50); do listening "$port" || break; sleep 0.2; done
  listening "$port" && fail "TCP port $port is in use (another Slurm?); this test's cluster needs it"
done
slurmctld -f "$SLURM_CONF" 9>&- || fail_with_logs "slurmctld did not start"
slurmd -f "$SLURM_CONF" 9>&- || fail_with_logs "slurmd did not start"
# Every Slurm client call is bounded: one that cannot reach the controller retries for long.
node_state() { timeout 5 sinfo -h -o %T 2> /dev/null || true; }
deadline=$((SECONDS + 20))
until [ "$(node_state)" = idle ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail_with_logs "the node is not idle after 20 s (sinfo: $(node_state))"
  sleep 0.2
done

echo "== the grid: 4 layers x 2 prompts, extraction on"
export XDG_CONFIG_HOME="$work/xdg"  # no defaults file from the user running the test, here or in the jobs
unset EMBER_DEFAULTS
cat > "$work/grid.toml" <<EOF
[model]
path = '$model'
threads = 1
[prompt]
text = "Once upon a time"
[generation]
max_tokens = 3
[output]
extract = true
stages = ["after_layer", "after_mlp"]
logits = "last"

[grid]
"output.layers" = [[0], [1], [2], [4]]

[[grid.zip]]
"prompt.text" = ["Once upon a time", "ذهب الولد إلى المدرسة"]
"generation.seed" = [1, 2]
EOF
cd "$work"
runs=$("$ember" sweep --list grid.toml 2>/dev/null | wc -l)
[ "$runs" -eq 8 ] || fail "the grid expands to $runs runs, not 8"

echo "== the local sweep"
"$ember" sweep "$work/grid.toml" --summary "$work/local.csv" > /dev/null
mv "$work/runs" "$work/local-runs"

echo "== the same grid on Slurm: 4 tasks, then the summary job"
# `ember sweep --slurm --submit --slurm-dir DIR ARGS...`, then waits (bounded) for both jobs
# and fails, with their logs, unless both completed. Sets sweep_job and summary_job.
submit_and_wait() {
  local dir=$1 start submitted states
  shift
  start=$(date +%s)
  submitted=$("$ember" sweep --slurm --submit --slurm-dir "$dir" --slurm-opt=--time=10 "$@")
  echo "$submitted"
  sweep_job=$(awk '$1 == "sweep" && $2 == "job" {print $3}' <<< "$submitted")
  summary_job=$(awk '$1 == "summary" && $2 == "job" {print $3}' <<< "$submitted")
  [ -n "$sweep_job" ] && [ -n "$summary_job" ] || fail "ember sweep --submit printed no job ids ($*)"
  while [ -n "$(timeout 10 squeue -h -j "$sweep_job,$summary_job" 2> /dev/null || echo "squeue failed")" ]; do
    if [ $(($(date +%s) - start)) -ge "$timeout" ]; then
      timeout 10 squeue >&2 || true
      fail_with_logs "the jobs of $* did not finish within $timeout s"
    fi
    sleep 1
  done
  echo "jobs finished in $(($(date +%s) - start)) s"
  for job in "$sweep_job" "$summary_job"; do
    states=$(timeout 10 scontrol -o show job "$job" | grep -o 'JobState=[A-Z_]*' | sort -u | tr '\n' ' ')
    [ "$states" = "JobState=COMPLETED " ] || {
      cat "$dir"/*.out >&2 || true
      fail "job $job ($*) ended as $states"
    }
  done
}
submit_and_wait "$work/slurm" --shards 4 "$work/grid.toml"
grep -q -- '--array=0-3' "$work/slurm/sweep.sbatch" || fail "sweep.sbatch is not a 4-task array"

echo "== the cluster's results against the local ones"
[ -f "$work/slurm/summary.csv" ] || fail "the summary job wrote no summary.csv"
# The summary bit for bit, but for the columns that say when and how fast a run ran.
python3 - "$work/local.csv" "$work/slurm/summary.csv" <<'PY'
import csv, io, sys
timing = {"run_id", "model_shared", "load_ms", "prefill_ms", "decode_ms", "total_ms"}
def stable(path):
    rows = list(csv.reader(open(path, newline="", encoding="utf-8")))
    keep = [i for i, name in enumerate(rows[0]) if name not in timing]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([[r[i] for i in keep] for r in rows])
    return out.getvalue(), len(rows) - 1
local, n_local = stable(sys.argv[1])
cluster, n_cluster = stable(sys.argv[2])
if local != cluster:
    sys.exit(f"test-slurm: FAILED: the summaries differ:\n--- local\n{local}--- cluster\n{cluster}")
if n_local != 8 or ",ok," not in local or ",failed," in local:
    sys.exit(f"test-slurm: FAILED: expected 8 ok runs:\n{local}")
print(f"summary: {n_cluster} rows equal (timing columns aside)")
PY
arrays=0
while IFS= read -r -d '' file; do
  relative=${file#"$work/local-runs/"}
  cmp -s "$file" "$work/runs/$relative" || fail "$relative differs between the local and the cluster run"
  arrays=$((arrays + 1))
done < <(find "$work/local-runs" -name '*.npy' -print0)
[ "$arrays" -ge 24 ] || fail "only $arrays arrays were compared"
for dir in "$work"/runs/grid/*/; do
  "$ember" verify "$dir" > /dev/null || fail "$dir does not verify"
done
python3 - "$work/local-runs" "$work/runs" <<'PY'
import json, os, sys
for name in sorted(os.listdir(os.path.join(sys.argv[1], "grid"))):
    a, b = (json.load(open(os.path.join(d, "grid", name, "run.json"))) for d in sys.argv[1:])
    for key in ("config_hash", "prompt", "generated"):
        if a[key] != b[key]:
            sys.exit(f"test-slurm: FAILED: {name}: run.json's {key} differs")
PY
echo "grid: 8 runs on a 4-task array, $arrays arrays and the summary equal to the local sweep"

echo "== a dataset of 20 prompts as 2 shards: a 2-task array, then the final job merges them"
python3 - "$work/dataset.jsonl" <<'PY'
import json, sys
texts = ["Once upon a time", "كتب الطالب الدرس", "The cat sat on the mat", "ذهب الولد إلى المدرسة",
         "Lily had a red ball", "في البيت قطة صغيرة", "He ran home", "قرأ المعلم الكتاب", "The sun was warm",
         "سلام", "Tom and Sam played", "درس الطالب في المكتبة", "A little bird sang", "الشمس مشرقة اليوم",
         "She smiled", "3 cats and 2 dogs", "They went to the park", "كان يا ما كان", "The end", "مرحبا بالعالم"]
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for i, t in enumerate(texts):
        line = {"id": f"s{i}", "text": t}
        if i % 3 == 0:
            line["target"] = " and then"
        if i % 4 == 1:
            line["select"] = "all"
        f.write(json.dumps(line, ensure_ascii=False) + "\n")
PY
cat > "$work/dataset.toml" <<EOF
[model]
path = '$model'
threads = 1
[dataset]
path = "dataset.jsonl"
batch_tokens = 24
shards = 2
[output]
dir = "ds"
stages = ["after_layer", "after_mlp"]
layers = [0, 3]
logits = "selected"
logit_lens = 3
EOF
# The reference: the same config run whole, here, then moved aside (a sealed directory
# moves as it is; its manifest records the directory it was written for).
"$ember" extract "$work/dataset.toml" 2> /dev/null || fail "the local dataset run failed"
mv "$work/ds" "$work/ds-local"
submit_and_wait "$work/slurm-ds" "$work/dataset.toml"
grep -q -- '--array=0-1' "$work/slurm-ds/sweep.sbatch" || fail "the dataset's sweep.sbatch is not a 2-task array"
grep -qF -- " merge --overwrite '$work/ds.shard-0-of-2' '$work/ds.shard-1-of-2' --out '$work/ds'" \
  "$work/slurm-ds/summary.sbatch" || fail "the dataset's summary.sbatch does not merge its shards"
"$ember" verify "$work/ds" > /dev/null || fail "the merged dataset run $work/ds does not verify"
for k in 0 1; do
  "$ember" verify "$work/ds.shard-$k-of-2" > /dev/null || fail "shard $k ($work/ds.shard-$k-of-2) does not verify"
done
# Every file, the manifest too: a dataset manifest has no run id and no timing field.
files=0
while IFS= read -r -d '' file; do
  relative=${file#"$work/ds-local/"}
  [ -f "$work/ds/$relative" ] || fail "the merged run has no $relative"
  cmp -s "$file" "$work/ds/$relative" || fail "$relative differs between the local run and the merged shards"
  files=$((files + 1))
done < <(find "$work/ds-local" -type f -print0)
[ "$(find "$work/ds" -type f | wc -l)" -eq "$files" ] || fail "the merged run has files the local run has not"
[ "$files" -ge 10 ] || fail "only $files files were compared"
rows=$(wc -l < "$work/ds/rows.jsonl")
samples=$(wc -l < "$work/ds/samples.jsonl")
[ "$samples" -eq 20 ] || fail "the merged run has $samples samples, not 20"
echo "dataset: 2 shards merged by the final job, $files files ($samples samples, $rows rows, manifest included) equal to the local run byte for byte"
echo "== attribution runs: a 2-run [attribute] grid and a 3-sample [attribute] dataset as a 2-task array"
cat > "$work/attr.toml" <<EOF
[model]
path = '$model'
threads = 1
[prompt]
text = "Once upon a time, there was a little girl named Lily"
[attribute]
target = ". She"
corrupt = "Once upon a time, there was a little boy named Lily"
verify_top = 2
[output]
stages = ["after_layer", "head_outputs"]
layers = [0, 3]

[grid]
"output.select" = ["last", "substring:girl"]
EOF
cat > "$work/attr-pairs.jsonl" <<'EOF'
{"text": "Once upon a time, there was a little girl named Lily", "corrupt": "Once upon a time, there was a little boy named Lily", "select": "substring:girl", "corrupt_select": "substring:boy"}
{"text": "Once upon a time, there was a girl named Lily", "corrupt": "Once upon a time, there was a little boy named Lily", "select": "substring:girl", "corrupt_select": "substring:boy"}
{"text": "The cat sat on the mat", "target": " and", "select": "last"}
EOF
cat > "$work/attr-ds.toml" <<EOF
[model]
path = '$model'
threads = 1
[dataset]
path = "attr-pairs.jsonl"
[attribute]
target = ". She"
[output]
dir = "attr-ds"
stages = ["after_mlp"]
EOF
"$ember" sweep "$work/attr.toml" "$work/attr-ds.toml" --summary "$work/local-attr.csv" > /dev/null
mv "$work/runs/attr" "$work/local-attr"
mv "$work/attr-ds" "$work/local-attr-ds"
submit_and_wait "$work/slurm-attr" --shards 2 "$work/attr.toml" "$work/attr-ds.toml"
grep -q -- '--array=0-1' "$work/slurm-attr/sweep.sbatch" || fail "the attribution sweep.sbatch is not a 2-task array"
# The summary (timing and run ids aside: prompt_tokens the summary job read back from the
# manifests), every file byte for byte, each manifest but for its run id, timing and seal,
# and the cluster summary's run id the manifest's.
python3 - "$work" <<'PY'
import csv, json, os, sys
work = sys.argv[1]
timing = {"run_id", "model_shared", "load_ms", "prefill_ms", "decode_ms", "total_ms"}
def rows(path):
    return list(csv.DictReader(open(path, newline="", encoding="utf-8")))
local, cluster = rows(f"{work}/local-attr.csv"), rows(f"{work}/slurm-attr/summary.csv")
stable = lambda rs: [{k: v for k, v in r.items() if k not in timing} for r in rs]
if stable(local) != stable(cluster):
    sys.exit(f"test-slurm: FAILED: the attribution summaries differ:\n{stable(local)}\n{stable(cluster)}")
if len(cluster) != 3 or any(r["outcome"] != "ok" or int(r["prompt_tokens"]) == 0 for r in cluster):
    sys.exit(f"test-slurm: FAILED: expected 3 ok attribution runs with prompt tokens:\n{cluster}")
files = 0
pairs = [(os.path.join(work, "local-attr-ds"), os.path.join(work, "attr-ds"))]
pairs += [(os.path.join(work, "local-attr", n), os.path.join(work, "runs", "attr", n)) for n in os.listdir(f"{work}/local-attr")]
for a, b in pairs:
    names = sorted(n for n in os.listdir(a) if not n.startswith("."))
    if names != sorted(n for n in os.listdir(b) if not n.startswith(".")):
        sys.exit(f"test-slurm: FAILED: {b} holds other files than {a}")
    for n in names:
        x, y = open(os.path.join(a, n), "rb").read(), open(os.path.join(b, n), "rb").read()
        if n == "manifest.json":
            x, y = json.loads(x), json.loads(y)
            ids = (x.pop("run_id"), y.pop("run_id"))
            row = [r for r in cluster if os.path.normpath(r["output_dir"]) == os.path.normpath(b)]
            if not row or not ids[1] or row[0]["run_id"] != ids[1]:
                sys.exit(f"test-slurm: FAILED: {b}: the summary's run id is not the manifest's ({ids[1]})")
            for m in (x, y):
                m.pop("timing")
                m.pop("manifest_sha256")
        if x != y:
            sys.exit(f"test-slurm: FAILED: {b}/{n} differs from the local sweep's")
        files += 1
if files < 12:
    sys.exit(f"test-slurm: FAILED: only {files} files compared")
print(f"attribution: 3 runs on a 2-task array, {files} files equal to the local sweep's (manifests but for run id and timing)")
PY
for dir in "$work"/runs/attr/*/ "$work/attr-ds"; do
  "$ember" verify "$dir" > /dev/null || fail "$dir does not verify"
done
echo "test-slurm: ok"
