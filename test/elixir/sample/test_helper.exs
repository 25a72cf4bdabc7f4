ExUnit.start(formatters: [:tracekit_exunit], tracekit: [dir: System.fetch_env!("TK_SAMPLE_DIR")])
