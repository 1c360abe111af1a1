#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The SPANK plugin in srun and sbatch on a SLURM test cluster, with the plugstack line the
# package ships (optional): the options in --help, every bad value and combination rejected before
# anything launches, what only the node can judge ending the tasks before exec, the same with a
# `required` line, and bad plugstack.conf arguments (required vs optional).
. "$(dirname "$0")/lib/spank.sh"
spank_plan 47
spank_cluster 1 ""
MARK="$CLUSTER_DIR/launched"

# --help of srun and sbatch lists the options with their text.
help=$(srun --help 2>&1)
for o in "ctrain-strategy=NAME" "ctrain-accelerator=NAME" "ctrain-precision=P" "ctrain-bind=closest|none|verbose"; do
    like "$help" "--$o" "srun --help lists --$o"
done
like "$help" "bind each task to the GPU, cores and NIC" "srun --help explains --ctrain-bind"
like "$(sbatch --help 2>&1)" "--ctrain-strategy=NAME" "sbatch --help lists --ctrain-strategy"
like "$(salloc --help 2>&1)" "--ctrain-strategy=NAME" "salloc --help lists --ctrain-strategy"

# rejected VALUE-DESCRIPTION PATTERN SRUN-OPTIONS...: srun fails, names the input, launches nothing.
rejected() {
    local what=$1 pat=$2
    shift 2
    rm -f "$MARK"
    run_srun -n2 "$@" touch "$MARK"
    if [ "$RC" -ne 0 ] && [ ! -e "$MARK" ] && printf '%s' "$ERR" | grep -q "ctrain: " &&
        printf '%s' "$ERR" | grep -Eq -- "$pat"; then
        ok 0 "rejected before launch: $what"
    else
        ok 1 "rejected before launch: $what"
        echo "#   rc=$RC launched=$([ -e "$MARK" ] && echo yes || echo no)"
        printf '%s\n' "$ERR" | head -n 8 | sed 's/^/#   /'
    fi
}
rejected "unknown strategy" "nosuch" --ctrain-strategy=nosuch
rejected "strategy with a typo gets a hint" "did you mean" --ctrain-strategy=dpp
rejected "strategy that is not a name" "not a name" "--ctrain-strategy=d p"
rejected "empty strategy" "not a name" --ctrain-strategy=
rejected "accelerator name as strategy" "cuda" --ctrain-strategy=cuda
rejected "unknown accelerator" "tpu" --ctrain-strategy=ddp --ctrain-accelerator=tpu
rejected "unknown precision" "99-weird" --ctrain-strategy=ddp --ctrain-precision=99-weird
rejected "precision the accelerator cannot run" "16-mixed" --ctrain-accelerator=cpu --ctrain-precision=16-mixed
rejected "bad binding mode" "sideways" --ctrain-strategy=ddp --ctrain-bind=sideways
rejected "single_device across 2 tasks (task layout)" "single_device" --ctrain-strategy=single_device
rejected "messages use the srun option names" "--ctrain-strategy" --ctrain-strategy=nosuch
rejected "ddp_sharded on 1 task (task layout)" "ddp_sharded" -n1 --ctrain-strategy=ddp_sharded
# A strategy that needs 2 tasks or more is judged with the step's layout, not before it.
run_srun -n2 --ctrain-strategy=ddp_sharded sh -c 'echo "$RANK"'
is "$RC.$(printf '%s' "$OUT" | sort | tr '\n' ' ')" "0.0 1 " "ddp_sharded on 2 tasks runs (not judged on 1 before the layout is known)"
rejected "combination in the other order" "16-mixed" --ctrain-precision=16-mixed --ctrain-accelerator=cpu
rejected "2 nodes: unknown strategy" "nosuch" -N2 --ctrain-strategy=nosuch

# The same with a `required` line, where SLURM also honours init_post_opt's and local_user_init's failure.
spank_plugstack required ""
rejected "required: unknown strategy" "nosuch" --ctrain-strategy=nosuch
rejected "required: precision the accelerator cannot run" "16-mixed" --ctrain-accelerator=cpu --ctrain-precision=16-mixed
rejected "required: single_device across 2 tasks" "single_device" --ctrain-strategy=single_device
run_srun -n2 --ctrain-strategy=ddp_sharded sh -c 'echo "$RANK"'
is "$RC.$(printf '%s' "$OUT" | sort | tr '\n' ' ')" "0.0 1 " "required: ddp_sharded on 2 tasks runs"
spank_plugstack "$SHIPPED" ""

# What only the node can judge: a login node's plugstack.conf without the nodes' allowed list. The
# task ends before exec with the node's message; nothing runs.
for line in "$SHIPPED" required; do
    spank_plugstack "$line" "allowed_strategies=ddp"
    spank_login_plugstack "$line" ""
    rejected "$line: the node refuses a strategy the login node allowed" "not allowed on this cluster" \
        -n1 --ctrain-strategy=single_device
    run_srun -n2 --ctrain-strategy=ddp sh -c 'echo "$RANK"'
    is "$RC.$(printf '%s' "$OUT" | sort | tr '\n' ' ')" "0.0 1 " "$line: the node runs a strategy it allows"
    spank_login_plugstack
done
spank_plugstack "$SHIPPED" ""

# sbatch and salloc check the same way before submitting anything.
out=$(timeout 60 sbatch --ctrain-strategy=nosuch --wrap "touch $MARK" 2>&1)
rc=$?
ok "$([ "$rc" -ne 0 ] && printf '%s' "$out" | grep -q "ctrain: --ctrain-strategy 'nosuch'" && [ -z "$(squeue -h)" ] && echo 0 || echo 1)" \
   "sbatch --ctrain-strategy=nosuch is refused, nothing queued"
out=$(timeout 60 salloc --ctrain-precision=99-weird true 2>&1)
ok "$([ $? -ne 0 ] && printf '%s' "$out" | grep -q "ctrain: .*99-weird" && echo 0 || echo 1)" \
   "salloc --ctrain-precision=99-weird is refused"
out=$(timeout 60 sbatch --ctrain-accelerator=cpu --ctrain-precision=16-mixed --wrap "touch $MARK" 2>&1)
rc=$?
ok "$([ "$rc" -ne 0 ] && printf '%s' "$out" | grep -q "ctrain: .*16-mixed" && [ -z "$(squeue -h)" ] && echo 0 || echo 1)" \
   "sbatch with a bad combination is refused, nothing queued"
printf '#!/bin/sh\n#SBATCH --ctrain-accelerator=cpu\n#SBATCH --ctrain-precision=16-mixed\ntouch %s\n' "$MARK" \
    >"$CLUSTER_DIR/bad.sh"
out=$(timeout 60 sbatch "$CLUSTER_DIR/bad.sh" 2>&1)
rc=$?
ok "$([ "$rc" -ne 0 ] && printf '%s' "$out" | grep -q "ctrain: .*16-mixed" && [ -z "$(squeue -h)" ] && echo 0 || echo 1)" \
   "#SBATCH lines with a bad combination are refused, nothing queued"
out=$(timeout 60 salloc --ctrain-accelerator=cpu --ctrain-precision=16-mixed touch "$MARK" 2>&1)
ok "$([ $? -ne 0 ] && [ ! -e "$MARK" ] && printf '%s' "$out" | grep -q "ctrain: .*16-mixed" && echo 0 || echo 1)" \
   "salloc with a bad combination is refused, its command not run"
run_srun -n2 --ctrain-strategy=dpp true
like "$ERR" "ctrain: --ctrain-strategy 'dpp' is not a known strategy" "the message names srun's option and the value"

# A site list of allowed strategies.
spank_plugstack "$SHIPPED" "allowed_strategies=ddp"
rejected "strategy outside allowed_strategies" "not allowed" --ctrain-strategy=single_device -n1
run_srun -n1 --ctrain-strategy=ddp true
ok "$RC" "an allowed strategy runs"

# Bad plugstack arguments: named in the log; required fails the step, optional disables the plugin.
for arg in "bind=sometimes" "port_base=80" "frobnicate=1" "default_strategy=" "verbose=yes"; do
    spank_plugstack required "$arg"
    rm -f "$MARK"
    run_srun -n1 touch "$MARK"
    if [ "$RC" -ne 0 ] && [ ! -e "$MARK" ] && printf '%s' "$ERR" | grep -Fq "ctrain: plugstack.conf argument '$arg'"; then
        ok 0 "required plugin with '$arg': named, step fails"
    else
        ok 1 "required plugin with '$arg': named, step fails"
        printf '%s\n' "rc=$RC" "$ERR" | head -n 6 | sed 's/^/#   /'
    fi
done
spank_plugstack required "bnd=closest"
run_srun -n1 true
like "$ERR" "did you mean 'bind='" "a misspelt argument gets a did-you-mean hint"

spank_plugstack optional "bind=sometimes"
run_srun -n1 --ctrain-strategy=ddp sh -c 'echo "rank=${RANK-unset}"'
is "$RC.$OUT" "0.rank=unset" "optional plugin with a bad argument: the step runs without ctrain"
like "$ERR" "plugin disabled" "optional plugin with a bad argument says it disabled itself"

# A good configuration with every argument is accepted.
spank_plugstack required "default_strategy=ddp allowed_strategies=ddp,single_device bind=none topology=$ROOT/t/fixtures/topologies/nvidia-dgx2.xml port_base=20000 verbose"
run_srun -n1 true
ok "$RC" "every plugstack argument together is accepted"

spank_done
