#!/bin/bash
# vars.sh EPOCH RUN_UUID RANDOM_SEED RESOURCE_NAME RUN_NUMBER CONTINUE ALPHA EPOCHS EPOCHS_PER_JOB: writes what
# it was given, in its arguments and its environment, to seen/RUN_UUID-EPOCH.
mkdir -p seen
{
    echo "args $*"
    echo "env $E_EPOCH $E_RUN_UUID $E_RANDOM_SEED $E_RESOURCE_NAME $E_RUN_NUMBER $E_CONTINUE $E_ALPHA $E_EPOCHS $E_EPOCHS_PER_JOB"
} > "seen/$2-$1"
