import Logging
import PostgresNIO
import Synchronization

/// Named prepared statements for the statement texts the store runs again and again.
///
/// postgres-nio prepares a statement on each connection the first time it runs there and reuses it after,
/// but it names a prepared statement by a *type* with a static text. The store's statements are built at
/// run time from their definitions, so this keeps a fixed number of slot types and gives each a text the
/// second time that text is seen (one-off statements such as migrations never take a slot). A slot's text
/// and parameter types never change once given, so every connection that prepares a slot prepares the same
/// statement. Texts beyond the slots, and calls whose parameter types differ from the slot's, run unnamed.
final class PostgresPreparedSlots: Sendable {
    static let shared = PostgresPreparedSlots()
    /// Well above the store's fixed statements and the shapes of the ingest write batch and of the worker's
    /// batch statements, one per batch size (a claim takes fewer jobs than the batch size whenever a walker's
    /// job of the kind runs, so every size up to `worker.batchSize` occurs). 256 slots ran out in the test
    /// process (it slots 384–511 texts), where the statements past them ran unnamed.
    static let capacity = 1 << slotBits
    private static let slotBits = 10
    /// Texts seen once are remembered up to this many, then forgotten all together.
    static let sightingsCapacity = 4_096

    private let slotTypes: [any PostgresPreparedSlot.Type]
    private let state = Mutex(State())

    private struct State {
        var slots: [SlotKey: Int] = [:]
        var texts: [String] = []
        var types: [[PostgresDataType]] = []
        var sightings: Set<String> = []
    }

    private init() {
        slotTypes = (0..<Self.capacity).map { index in
            var tag: any SlotTag.Type = SlotRoot.self
            for bit in (0..<Self.slotBits).reversed() {
                tag = (index >> bit) & 1 == 1 ? Self.one(after: tag) : Self.zero(after: tag)
            }
            return Self.slot(for: tag)
        }
    }

    private static func zero<Tag: SlotTag>(after tag: Tag.Type) -> any SlotTag.Type { SlotZero<Tag>.self }
    private static func one<Tag: SlotTag>(after tag: Tag.Type) -> any SlotTag.Type { SlotOne<Tag>.self }
    private static func slot<Tag: SlotTag>(for tag: Tag.Type) -> any PostgresPreparedSlot.Type {
        PreparedSlot<Tag>.self
    }

    /// The slot to run `sql` with, or nil to run it unnamed: a text seen once, more texts than slots, a bind
    /// of unknown type (`.null`), or parameter types other than the slot's.
    func slot(for sql: String, types: [PostgresDataType]) -> (any PostgresPreparedSlot.Type)? {
        let index: Int? = state.withLock { state in
            let key = SlotKey(sql)
            if let index = state.slots[key] {
                return state.types[index] == types ? index : nil
            }
            guard state.texts.count < Self.capacity, !types.contains(.null) else { return nil }
            guard state.sightings.contains(sql) else {
                if state.sightings.count >= Self.sightingsCapacity { state.sightings.removeAll() }
                state.sightings.insert(sql)
                return nil
            }
            state.sightings.remove(sql)
            state.slots[key] = state.texts.count
            state.texts.append(sql)
            state.types.append(types)
            return state.texts.count - 1
        }
        return index.map { slotTypes[$0] }
    }

    func text(at index: Int) -> String { state.withLock { $0.texts[index] } }
    func types(at index: Int) -> [PostgresDataType] { state.withLock { $0.types[index] } }
}

/// A statement text as the slots' key, hashed from a sample of its bytes: its length, its first and last 64 and
/// one in every `stride` between, rather than all of it (an ingest's two texts run to 3–4 KB each): `scripts/bench-ab`
/// gave 0.979 and 0.991 of `stepd`'s CPU per ingest with it. Equality still compares whole texts, so texts that
/// agree on the sample only share a hash bucket; it compares their bytes, as the hash reads them (`String`'s own `==`
/// calls canonically equivalent texts equal, which would hash apart: a `Dictionary` may trap on such keys).
struct SlotKey: Hashable {
    let text: String
    static let edge = 64
    static let stride = 64

    init(_ text: String) {
        self.text = text
    }

    static func == (lhs: SlotKey, rhs: SlotKey) -> Bool { lhs.text.utf8.elementsEqual(rhs.text.utf8) }

    func hash(into hasher: inout Hasher) {
        var text = text
        text.withUTF8 { bytes in
            hasher.combine(bytes.count)
            guard bytes.count > 2 * Self.edge else {
                hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
                return
            }
            hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[..<Self.edge])))
            hasher.combine(
                bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[(bytes.count - Self.edge)...])))
            for index in Swift.stride(from: Self.edge, to: bytes.count - Self.edge, by: Self.stride) {
                hasher.combine(bytes[index])
            }
        }
    }
}

/// One slot's statement type, as the store calls it.
protocol PostgresPreparedSlot: Sendable {
    static func run(
        on connection: PostgresConnection, bindings: PostgresBindings, logger: Logger,
        _ onRow: (PostgresRow) -> Void
    ) async throws
}

/// Distinct types for the slots, built by nesting: slot n is `SlotRoot` wrapped in `SlotZero` and `SlotOne`
/// by n's binary digits, most significant first.
protocol SlotTag {
    static var index: Int { get }
}

enum SlotRoot: SlotTag {
    static let index = 0
}

enum SlotZero<Previous: SlotTag>: SlotTag {
    static var index: Int { Previous.index * 2 }
}

enum SlotOne<Previous: SlotTag>: SlotTag {
    static var index: Int { Previous.index * 2 + 1 }
}

private struct PreparedSlot<Tag: SlotTag>: PostgresPreparedStatement, PostgresPreparedSlot {
    typealias Row = PostgresRow

    static var name: String { "stepledger_\(Tag.index)" }
    static var sql: String { PostgresPreparedSlots.shared.text(at: Tag.index) }
    static var bindingDataTypes: [PostgresDataType] { PostgresPreparedSlots.shared.types(at: Tag.index) }

    let bindings: PostgresBindings

    func makeBindings() throws -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }

    static func run(
        on connection: PostgresConnection, bindings: PostgresBindings, logger: Logger,
        _ onRow: (PostgresRow) -> Void
    ) async throws {
        let rows = try await connection.execute(Self(bindings: bindings), logger: logger)
        for try await row in rows { onRow(row) }
    }
}
