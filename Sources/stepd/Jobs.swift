import ArgumentParser
import Foundation
import StepCore
import StepDatabase
import StepJobs
import StepSettings
import StepStore

struct Jobs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Look at, revive and discard jobs in the durable queue.",
        subcommands: [List.self, Retry.self, Discard.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List jobs, earliest run time first: id, state, kind, walker, attempts, run at, last error.")

        @Option(help: "pending, running or dead; every state when absent.")
        var state: String?

        @Option(help: "At most this many jobs.")
        var limit: Int = 100

        @OptionGroup var common: CommonOptions

        func validate() throws {
            if let state, JobState(rawValue: state) == nil {
                throw ValidationError("--state must be pending, running or dead")
            }
            guard (1...10_000).contains(limit) else { throw ValidationError("--limit must be between 1 and 10000") }
        }

        func run() async throws {
            let jobs = try await common.withQueue { queue in
                try await queue.list(state: state.flatMap(JobState.init(rawValue:)), limit: limit)
            }
            print(["ID", "STATE", "KIND", "WALKER", "ATTEMPTS", "RUN AT", "LAST ERROR"].joined(separator: "\t"))
            for job in jobs {
                print(
                    [
                        job.id, job.state.rawValue, job.kind, job.walkerId.isEmpty ? "-" : job.walkerId,
                        "\(job.attempts)/\(job.maxAttempts)", InstantParser.format(job.runAt), job.lastError ?? "-",
                    ].joined(separator: "\t"))
            }
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a dead job pending again, to run now with a fresh count of attempts.")

        @Argument(help: "The job's id (from `stepd jobs list --state dead`).")
        var id: String

        @OptionGroup var common: CommonOptions

        func run() async throws {
            let outcome = try await common.withQueue { queue in
                try await queue.retry(id: id, by: .commandLine, now: Date())
            }
            switch outcome {
            case .retried:
                print("job \(id) is pending again and runs at the next poll")
            case .coalesced(let pending):
                print("job \(id) removed: pending job \(pending) for the same work runs instead")
            case .notFound:
                throw CommandFailure("no job has the id \(id)")
            case .notDead(let state):
                throw CommandFailure("job \(id) is \(state.rawValue), not dead; only dead jobs are retried")
            }
        }
    }

    struct Discard: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a dead job that should not run again (only dead jobs are discarded).")

        @Argument(help: "The job's id (from `stepd jobs list --state dead`).")
        var id: String

        @OptionGroup var common: CommonOptions

        func run() async throws {
            let outcome = try await common.withQueue { queue in
                try await queue.discard(id: id, by: .commandLine, now: Date())
            }
            switch outcome {
            case .discarded:
                print("job \(id) discarded")
            case .notFound:
                throw CommandFailure("no job has the id \(id)")
            case .notDead(let state):
                throw CommandFailure("job \(id) is \(state.rawValue), not dead; only dead jobs are discarded")
            case .stillNeeded(let reason):
                throw CommandFailure("job \(id) is not discarded: \(reason) (stepd jobs retry \(id))")
            }
        }
    }
}

extension CommonOptions {
    /// Runs `body` with the job queue of the configured database (not migrated: operators run `stepd migrate`).
    func withQueue<Result>(_ body: (JobQueue) async throws -> Result) async throws -> Result {
        let configuration = try await load()
        let settings = configuration.jobSettings
        return try await configuration.withStore(label: "stepd.jobs") { store in
            try await body(JobQueue(store: store, leaseSeconds: settings.leaseSeconds, backoff: settings.backoff))
        }
    }
}
