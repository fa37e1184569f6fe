from protein_lm.data import DataConfig

DataConfig(**config["data"]).check("config (config/config.yaml and --config)")  # before anything runs


rule make_data:
    """The SYNTHETIC data set, made once and shared by every run."""
    output:
        simulated=SIMULATED,
        experimental=EXPERIMENTAL,
        metadata=f"{DATA}/SYNTHETIC_metadata.json",
    params:
        data=config["data"],
    log:
        "results/logs/make_data.log",
    script:
        "../scripts/make_data.py"
