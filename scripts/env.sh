# Source me: environment for running zen's MPI programs as root on an oversubscribed machine.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
ZEN_NPROC=$(nproc 2>/dev/null || echo 2)
export ZEN_NPROC
