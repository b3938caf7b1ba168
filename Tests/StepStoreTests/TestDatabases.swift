import Foundation
import Logging
import StepStore

/// The engines every store test runs on.
enum TestDatabases {
    static var kinds: [DatabaseKind] { [.sqlite] }

    /// A fresh, migrated, empty store of `kind`.
    static func make(_ kind: DatabaseKind) async throws -> Store {
        switch kind {
        case .sqlite:
            let path = FileManager.default.temporaryDirectory.appendingPathComponent(
                "store-\(UUID().uuidString).sqlite"
            ).path
            return try await StoreFactory.open(url: path, logger: Logger(label: "test"), migrate: true)
        case .postgres:
            throw StoreError.invalidConfiguration("PostgreSQL tests are not set up")
        }
    }
}

extension Store {
    func close() async throws { try await database.close() }
}
