# Sourced: strategy_flags CONFIG STRATEGY prints the --set flags that run
# CONFIG with STRATEGY. A config refuses the options of a strategy that does
# not read them, so a [parallel.ddp] section (the examples tune DDP's
# buckets) is removed for none and fsdp.
strategy_flags() {
  echo "--set parallel.strategy=$2"
  case $2 in ddp | zero1) ;; *) grep -q '^\[parallel\.ddp\]' "$1" && echo "--set ~parallel.ddp" ;; esac
  true
}
