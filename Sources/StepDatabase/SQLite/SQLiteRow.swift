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
    let values: [SQLiteValue]

    var allColumns: [String] { columns }

    func contains(column: String) -> Bool { columns.contains(column) }

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
        guard let index = columns.firstIndex(of: column) else {
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
