import ArgumentParser

@main
struct StepBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stepbench",
        abstract: "Benchmarks for stepd on this machine: a JSON-echo baseline, load, ingest/echo comparison, history.",
        discussion: """
            Every client subcommand sends traffic only to 127.0.0.1, localhost or ::1. Start the server with \
            STEPLEDGER_RATE_LIMIT_INGEST_PER_MINUTE=100000 and a development secret in STEPLEDGER_JWT_DEV_SECRET, \
            and give stepbench the same secret (scripts/bench does all of this).
            """,
        subcommands: [
            Echo.self, Load.self, Compare.self, History.self, PgbenchScript.self, DecodeBench.self, ReconcileBench.self,
            ReviewsBench.self, WorkerLoad.self,
            Keys.self, HealthStatsBench.self, CacheMemory.self,
        ]
    )
}
