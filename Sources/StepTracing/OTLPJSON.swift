import Foundation
import Tracing

/// The OTLP/JSON encoding of a batch of spans (`ExportTraceServiceRequest`): ids in lower-case hex, times as
/// decimal strings of nanoseconds, enums as numbers, as the OTLP/HTTP JSON mapping prescribes.
enum OTLPJSON {
    static func encode(_ spans: [FinishedSpan], settings: OTLPExporter.Settings) -> [UInt8] {
        var resource: [[String: Any]] = [attribute("service.name", .string(settings.serviceName))]
        if let version = settings.serviceVersion { resource.append(attribute("service.version", .string(version))) }
        let scope: [String: Any] = ["scope": ["name": "stepledger"], "spans": spans.map { Self.span($0) }]
        let resourceSpans: [String: Any] = ["resource": ["attributes": resource], "scopeSpans": [scope]]
        let document: [String: Any] = ["resourceSpans": [resourceSpans]]
        return Array((try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys])) ?? Data())
    }

    static func span(_ span: FinishedSpan) -> [String: Any] {
        var object: [String: Any] = [:]
        object["traceId"] = span.identity.traceIDHex
        object["spanId"] = span.identity.spanIDHex
        object["name"] = span.name
        object["kind"] = kind(span.kind)
        object["startTimeUnixNano"] = String(span.startNanoseconds)
        object["endTimeUnixNano"] = String(span.endNanoseconds)
        object["attributes"] = attributes(span.attributes)
        // STATUS_CODE_UNSET 0, ERROR 2.
        var status: [String: Any] = ["code": span.isError ? 2 : 0]
        if span.isError { status["message"] = span.statusMessage ?? "" }
        object["status"] = status
        if let parent = span.parentSpanID { object["parentSpanId"] = Hex.encode(parent) }
        if !span.events.isEmpty {
            object["events"] = span.events.map { event -> [String: Any] in
                var encoded: [String: Any] = [:]
                encoded["name"] = event.name
                encoded["timeUnixNano"] = String(event.nanosecondsSinceEpoch)
                encoded["attributes"] = attributes(event.attributes)
                return encoded
            }
        }
        return object
    }

    /// SPAN_KIND_INTERNAL 1, SERVER 2, CLIENT 3, PRODUCER 4, CONSUMER 5.
    static func kind(_ kind: SpanKind) -> Int {
        switch kind {
        case .server: 2
        case .client: 3
        case .producer: 4
        case .consumer: 5
        default: 1
        }
    }

    static func attributes(_ attributes: SpanAttributes) -> [[String: Any]] {
        var list: [[String: Any]] = []
        attributes.forEach { key, value in list.append(attribute(key, value)) }
        return list.sorted { ($0["key"] as? String ?? "") < ($1["key"] as? String ?? "") }
    }

    static func attribute(_ key: String, _ value: SpanAttribute) -> [String: Any] {
        ["key": key, "value": anyValue(value)]
    }

    static func anyValue(_ value: SpanAttribute) -> [String: Any] {
        switch value {
        case .int32(let number): ["intValue": String(number)]
        case .int64(let number): ["intValue": String(number)]
        case .double(let number): ["doubleValue": number]
        case .bool(let flag): ["boolValue": flag]
        case .string(let text): ["stringValue": text]
        case .int32Array(let numbers): array(numbers.map { ["intValue": String($0)] })
        case .int64Array(let numbers): array(numbers.map { ["intValue": String($0)] })
        case .doubleArray(let numbers): array(numbers.map { ["doubleValue": $0] })
        case .boolArray(let flags): array(flags.map { ["boolValue": $0] })
        case .stringArray(let texts): array(texts.map { ["stringValue": $0] })
        case .stringConvertible(let convertible): ["stringValue": convertible.description]
        case .stringConvertibleArray(let values): array(values.map { ["stringValue": $0.description] })
        default: ["stringValue": "\(value)"]
        }
    }

    static func array(_ values: [[String: Any]]) -> [String: Any] {
        ["arrayValue": ["values": values]]
    }
}
