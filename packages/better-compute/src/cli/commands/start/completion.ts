/** `completion bash|zsh|fish`: a script generated from the manifest, project commands included. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'completion',
  group: 'Start',
  summary: 'Print a shell completion script for bash, zsh or fish',
  target: 'none',
  output: false,
  positionals: [{ name: 'shell', description: 'bash, zsh or fish', required: true }],
  examples: [
    'source <(better-compute completion bash)     # bash: in ~/.bashrc',
    'source <(better-compute completion zsh)      # zsh: in ~/.zshrc',
    'better-compute completion fish | source      # fish: in ~/.config/fish/config.fish',
  ],
  async run({ args, program }) {
    const { completionScript } = await import('../../completion.js');
    return completionScript(args.shell, await program.manifest());
  },
});
