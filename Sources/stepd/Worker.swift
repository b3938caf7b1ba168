import ArgumentParser
import StepAPI
import StepDatabase
import StepStore

struct Worker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the job worker alone, without the HTTP server, until SIGTERM or SIGINT.",
        discussion: """
            Claims due jobs (reconciliation, maintenance) from the database's queue, as `stepd serve` does \
            when worker.enabled is true. Several workers and servers may share one PostgreSQL database.
            """)

    @Option(help: "Jobs run at once (config key worker.concurrency). Default 2.")
    var concurrency: Int?

    @OptionGroup var common: CommonOptions

    func run() async throws {
        var overrides: [String: String] = [:]
        if let concurrency { overrides["worker.concurrency"] = String(concurrency) }
        let configuration = try await common.load(overrides: overrides)
        do {
            try await runStandaloneWorker(configuration: configuration)
        } catch let error as StoreError {
            throw ValidationError(error.detail)
        }
    }
}
