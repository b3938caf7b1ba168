import ArgumentParser
import Foundation
import StepAPI
import StepCore
import StepSettings
import StepStore

/// `stepd operator`: the named operators of the admin API and the console. Each create and revoke is written to
/// the admin audit as the actor `stepd` (id `cli`): whoever runs the command holds the database's credentials.
struct Operator: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "operator", abstract: "Create, revoke and list the operators of the admin API and console.",
        discussion: """
            Roles: viewer (reads the queues, jobs, metrics and audit), reviewer (also claims and decides review \
            entries, reverses a day, suspends or reinstates a walker), operator (also decides in bulk and retries \
            or discards jobs). The database must be migrated (`stepd migrate`).
            """,
        subcommands: [Create.self, Revoke.self, List.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create an operator and print its secret, once: only its digest is stored.",
            discussion: """
                The secret (`slo_` and 43 base64url characters) is the operator's bearer token \
                (`Authorization: Bearer slo_…`) and its sign-in credential at the console. Keep it in a password \
                manager; a lost secret cannot be shown again: revoke the operator and create it anew.
                """)

        @Option(help: "1 to 64 of A-Z a-z 0-9 . _ -, unique among active operators.")
        var name: String

        @Option(help: "viewer, reviewer or operator.")
        var role: String

        @OptionGroup var common: CommonOptions

        func validate() throws {
            guard OperatorName.isValid(name) else {
                throw ValidationError("--name must be 1 to 64 of A-Z a-z 0-9 . _ - (got \(name.debugDescription))")
            }
            guard OperatorRole(rawValue: role) != nil else {
                throw ValidationError("--role must be viewer, reviewer or operator (got \(role.debugDescription))")
            }
        }

        func run() async throws {
            guard let role = OperatorRole(rawValue: role) else { throw ValidationError("unknown role") }
            let configuration = try await common.load()
            let outcome = try await configuration.withStore(label: "stepd.operator") { store in
                try await OperatorAccounts.create(store: store, name: name, role: role, now: Date())
            }
            switch outcome {
            case .created(let record, let secret):
                printWarning(
                    "operator \(record.name) created with the role \(record.role.rawValue); its secret follows,")
                printWarning("shown this once (only its digest is stored):")
                print(secret)
            case .invalidName:
                throw ValidationError("--name must be 1 to 64 of A-Z a-z 0-9 . _ -")
            case .nameReserved:
                throw CommandFailure(
                    "\(name) is reserved: the audit names the admin.token's actions admin and this command's stepd")
            case .nameTaken:
                throw CommandFailure("an active operator is already named \(name); revoke it first")
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke an operator: its secret and its console sessions stop working at once.")

        @Option(help: "The active operator's name (from `stepd operator list`).")
        var name: String

        @OptionGroup var common: CommonOptions

        func run() async throws {
            let configuration = try await common.load()
            let revoked = try await configuration.withStore(label: "stepd.operator") { store in
                try await OperatorAccounts.revoke(store: store, name: name, now: Date())
            }
            guard revoked != nil else { throw CommandFailure("no active operator is named \(name)") }
            print("operator \(name) revoked")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List every operator, revoked ones included: name, role, created, revoked.")

        @OptionGroup var common: CommonOptions

        func run() async throws {
            let configuration = try await common.load()
            let operators = try await configuration.withStore(label: "stepd.operator") { store in
                try await store.withoutTransaction { try await $0.operators() }
            }
            print(["NAME", "ROLE", "CREATED", "REVOKED"].joined(separator: "\t"))
            for record in operators {
                print(
                    [
                        record.name, record.role.rawValue, InstantParser.format(record.createdAt),
                        record.revokedAt.map { InstantParser.format($0) } ?? "-",
                    ].joined(separator: "\t"))
            }
        }
    }
}
