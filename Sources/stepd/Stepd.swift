import ArgumentParser

@main
struct Stepd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stepd",
        abstract: "StepLedger: verified step ingest, streaks and Energy.",
        subcommands: [Serve.self, Worker.self, Jobs.self, Token.self, Device.self, Migrate.self, Prune.self]
    )
}
