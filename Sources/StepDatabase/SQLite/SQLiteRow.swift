import SQLKit

/// A value as SQLite stores it.
enum SQLiteValue: Sendable, Hashable {
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
    case null
}

/// One result row. Decodes the types the store reads (integers, text, reals, their optionals) without an
/// intermediate `Decoder`.
struct SQLiteRow: SQLRow {
    let columns: [String]
    /// Each column's position by name (`indexes(of:)`), made once per prepared statement: rows are read column by
    /// column by name (the day's state, fourteen of them), and a search of `columns` for each compared names
    /// about a hundred times a row.
    let indexes: [String: Int]
    let values: [SQLiteValue]

    /// The position of each name in `columns`; a name that occurs twice is found at its first place, as a search
    /// from the start would find it.
    static func indexes(of columns: [String]) -> [String: Int] {
        var indexes: [String: Int] = [:]
        indexes.reserveCapacity(columns.count)
        for (index, column) in columns.enumerated() where indexes[column] == nil { indexes[column] = index }
        return indexes
    }

    var allColumns: [String] { columns }

    func contains(column: String) -> Bool { indexes[column] != nil }

    func decodeNil(column: String) throws -> Bool { try value(column) == .null }

    func decode<D: Decodable>(column: String, as type: D.Type) throws -> D {
        let value = try value(column)
        if case .null = value {
            guard let optional = D.self as? any ExpressibleByNilLiteral.Type,
                let none = optional.init(nilLiteral: ()) as? D
            else { throw SQLiteDecodingError(column: column, type: "\(D.self)", found: "NULL") }
            return none
        }
        let decoded: Any? =
            switch value {
            case .integer(let integer):
                if D.self == Int.self || D.self == Int?.self {
                    Int(integer)
                } else if D.self == Int64.self || D.self == Int64?.self {
                    integer
                } else if D.self == Bool.self || D.self == Bool?.self {
                    integer != 0
                } else if D.self == Double.self || D.self == Double?.self {
                    Double(integer)
                } else {
                    nil
                }
            case .real(let real): D.self == Double.self || D.self == Double?.self ? real : nil
            case .text(let text): D.self == String.self || D.self == String?.self ? text : nil
            case .blob(let bytes): D.self == [UInt8].self || D.self == [UInt8]?.self ? bytes : nil
            case .null: nil
            }
        guard let decoded, let typed = decoded as? D else {
            throw SQLiteDecodingError(column: column, type: "\(D.self)", found: "\(value)")
        }
        return typed
    }

    private func value(_ column: String) throws -> SQLiteValue {
        guard let index = indexes[column] else {
            throw SQLiteDecodingError(column: column, type: "any", found: "no such column")
        }
        return values[index]
    }
}

struct SQLiteDecodingError: Error, CustomStringConvertible {
    let column: String
    let type: String
    let found: String

    var description: String { "cannot read column \(column) as \(type): found \(found)" }
}
