/* purpose-built book for lorescan lint: ls810 */
var APPLY_LIMIT = 6;
var dynamicLore = [
  { keywords: ['harbor', 'pier*'], priority: 4, scenario: 'The harbor.', triggers: ['gull'] },
  { minMessages: 4, scenario: 'Later on.' },
  { tag: 'gull', scenario: 'Gulls wheel overhead.' },
];
