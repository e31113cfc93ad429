/**
 * What the parts of the server outside modules/ use of the tunnels module: the tunnel route
 * (src/tunnels/) reads a ticket, spends it and ends the tunnel it opened.
 */
export { endTunnel, spendTicket, targetKind } from './service.js';
export { readTicket, type TicketClaims } from './ticket.js';
