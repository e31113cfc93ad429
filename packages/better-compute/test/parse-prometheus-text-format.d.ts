/** The parser the metrics test reads `/metrics` with; it ships without types. */
declare module 'parse-prometheus-text-format' {
  export default function parsePrometheusTextFormat(text: string): unknown[];
}
