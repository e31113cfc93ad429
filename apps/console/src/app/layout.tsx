import type { Metadata } from 'next';
import type { ReactNode } from 'react';
import './globals.css';

// Every page is rendered for its request, even those that read nothing of it (sign-in, not found):
// a page rendered ahead of time would carry script tags without the response's CSP nonce
// (lib/mount.mjs), which the browser refuses to run.
export const dynamic = 'force-dynamic';

export const metadata: Metadata = {
  title: 'better-compute console',
  description: 'Reserve GPUs, watch nodes and follow events on a better-compute deployment',
};

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    <html lang="en">
      <body>{children}</body>
    </html>
  );
}
