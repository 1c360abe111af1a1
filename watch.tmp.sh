# inside the root: when a sup.log has "new step on" and no "supervise exit" after 25 s, dump state
for i in $(seq 600); do
  for f in /tmp/ctrain-test.*/sup.log; do
    [ -f "$f" ] || continue
    if grep -q "new step on" "$f" && ! grep -q "^supervise exit" "$f"; then
      sleep 25
      grep -q "^supervise exit" "$f" && exit 0
      c=$(ls -d /tmp/ctrain-slurm.* | head -1)
      {
      echo "== sup.log"; cat "$f"
      export SLURM_CONF=$c/slurm.conf
      echo "== squeue -s"; squeue -s; squeue
      echo "== ps"; ps -eo pid,ppid,stat,etime,args | grep -E "ctrain|srun|slurmstepd" | grep -v grep
      for l in $c/log/*.log; do echo "== $l"; tail -30 $l; done
      } > /work/main/watch.out 2>&1
      exit 0
    fi
  done
  sleep 1
done
