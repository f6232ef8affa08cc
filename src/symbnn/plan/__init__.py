"""The workflow's planning, importable and tested without Snakemake: which jobs an
experiment has (`jobs`), where their files are (`paths`), what each job's params hold
(`params`), what it asks for (`resources`), which networks the acceptance rule keeps (`kept`)
and the counts measured in child processes (`measured`).

Every function takes the checked settings (`symbnn.settings.Config`) and plain values (an
experiment's name, a method, a block); the rule files (rules/*.smk) hold the rules and the
thin glue that passes a job's wildcards and checkpoint outputs in. Planning imports no torch:
what needs it runs in a child process (`measured`)."""
