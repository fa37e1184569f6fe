echo "${snakemake_params[word]} $(wc -l < "${snakemake_input[0]}")" > "${snakemake_output[0]}"
