#!/bin/sh
# The SPANK plugin in srun and sbatch on a loopback SLURM cluster: the options in --help, every
# bad value rejected before anything launches, and bad plugstack.conf arguments (required vs optional).
. "$(dirname "$0")/lib/spank.sh"
spank_plan 32
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

# sbatch and salloc check the same way before submitting anything.
out=$(timeout 60 sbatch --ctrain-strategy=nosuch --wrap "touch $MARK" 2>&1)
rc=$?
ok "$([ "$rc" -ne 0 ] && printf '%s' "$out" | grep -q "ctrain: --ctrain-strategy 'nosuch'" && [ -z "$(squeue -h)" ] && echo 0 || echo 1)" \
   "sbatch --ctrain-strategy=nosuch is refused, nothing queued"
out=$(timeout 60 salloc --ctrain-precision=99-weird true 2>&1)
ok "$([ $? -ne 0 ] && printf '%s' "$out" | grep -q "ctrain: .*99-weird" && echo 0 || echo 1)" \
   "salloc --ctrain-precision=99-weird is refused"
run_srun -n2 --ctrain-strategy=dpp true
like "$ERR" "ctrain: --ctrain-strategy 'dpp' is not a known strategy" "the message names srun's option and the value"

# A site list of allowed strategies.
spank_plugstack required "allowed_strategies=ddp"
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
