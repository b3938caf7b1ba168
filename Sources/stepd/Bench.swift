import ArgumentParser

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "x"); func run() async throws {}
}
