/* purpose-built book for lorescan lint: ls811 */
var APPLY_LIMIT = 6;
var dynamicLore = [
  { keywords: ['harbor', 'pier*'], priority: 4, scenario: 'The harbor.', triggers: ['gull'] },
  { keywords: ['storm'], maxMessages: null, scenario: 'A storm.' },
  { tag: 'gull', scenario: 'Gulls wheel overhead.' },
];
